"""One colour per graph capacity and one per policy, everywhere in the product.

Deterministic, so a capacity is the same colour on the job page, the explain page, the live
recipe page and an exported PNG. Powers of two (the catalogs' ladder, 1 ... 65,536) take
distinct qualitative colours by exponent; any other capacity (a boot's own, say 96 or 384) takes
its place on a continuous scale by log2, so it sits between its power-of-two neighbours.
Importable without Django (the recipe page's live figures reuse it)."""

from __future__ import annotations

import math

from plotly.colors import qualitative, sample_colorscale

from scheduler_core.policies import POLICIES

# Dark24 minus its near-greys, in an order that keeps neighbouring exponents far apart in hue.
_POWER_COLOURS: tuple[str, ...] = (
    "#2E91E5",  # 1
    "#E15F99",  # 2
    "#1CA71C",  # 4
    "#FB0D0D",  # 8
    "#DA16FF",  # 16
    "#B68100",  # 32
    "#0D2A63",  # 64
    "#EB663B",  # 128
    "#511CFB",  # 256
    "#00A08B",  # 512
    "#FB00D1",  # 1024
    "#FC0080",  # 2048
    "#750D86",  # 4096
    "#6C4516",  # 8192
    "#862A16",  # 16384
    "#A777F1",  # 32768
    "#778AAE",  # 65536
)
_MAX_EXPONENT = len(_POWER_COLOURS) - 1
_POLICY_COLOURS: tuple[str, ...] = tuple(qualitative.Plotly)  # cost blue, rule red: as the pages always showed
_OTHER_POLICY = "#7f7f7f"
DECODE_COLOUR = "#9aa5b1"  # decode rows in lanes timelines: not a prefill capacity
INIT_COLOUR = "#d7dde4"


def capacity_colour(capacity: int) -> str:
    """The colour of a graph of `capacity` prefill tokens."""
    if capacity < 1:
        return DECODE_COLOUR
    exponent = math.log2(capacity)
    if exponent.is_integer() and exponent <= _MAX_EXPONENT:
        return _POWER_COLOURS[int(exponent)]
    position = min(1.0, exponent / (_MAX_EXPONENT + 1))
    return str(sample_colorscale("Turbo", [position])[0])


def policy_colour(policy: str) -> str:
    """The colour of a policy: scheduler_core's list order, so a new policy gets the next colour."""
    names = list(POLICIES)
    if policy not in names or names.index(policy) >= len(_POLICY_COLOURS):
        return _OTHER_POLICY
    return _POLICY_COLOURS[names.index(policy)]
