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

# Tableau's ten for the ladder the catalogs use (16 ... 8192), each far from its neighbours in hue;
# darker tones outside it. Index = log2(capacity).
_POWER_COLOURS: tuple[str, ...] = (
    "#c7c7c7",  # 1
    "#a5a5a5",  # 2
    "#7f7f7f",  # 4
    "#5f5f5f",  # 8
    "#9c755f",  # 16
    "#ff9da7",  # 32
    "#76b7b2",  # 64
    "#59a14f",  # 128
    "#edc948",  # 256
    "#f28e2b",  # 512
    "#e15759",  # 1024
    "#b07aa1",  # 2048
    "#4e79a7",  # 4096
    "#bab0ac",  # 8192
    "#1f3b5c",  # 16384
    "#6b3e26",  # 32768
    "#333333",  # 65536
)
_MAX_EXPONENT = len(_POWER_COLOURS) - 1
_POLICY_COLOURS: tuple[str, ...] = tuple(qualitative.Plotly)  # cost blue, rule red: as the pages always showed
_OTHER_POLICY = "#7f7f7f"
DECODE_COLOUR = "#9aa5b1"  # decode rows in lanes timelines: not a prefill capacity
INIT_COLOUR = "#d7dde4"
# Launch kinds of the multi-lane loop, kept apart from the capacity and policy colours.
KIND_COLOURS: dict[str, str] = {"init": INIT_COLOUR, "prefill": "#2f4b7c", "mixed": "#a05195", "decode": DECODE_COLOUR}


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
