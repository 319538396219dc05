"""A boot's provenance: what a capture writes about itself (device, libraries, process, seed,
drift), declared here, where it is written (`device.provenance`, `capture.capture_boot`), and read
typed by everyone who reads it (the web's boot pages through `heliosweb.catalogs.provenance`).

`ProvenanceRecord` is the JSON as a capture writes it. `Provenance` is the part pages read
(`device`, `mode`, `drift`, `host_load`, `repeats`), parsed from any stored JSON (a capture's, or an upload's, which may
carry only some keys): strictly where it enters (`parse_typed`), leniently where it is read back
(`read`: a key of the wrong type reads as absent). Importing this module never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NotRequired, Self, TypedDict, TypeVar

from scheduler_core.catalog import MAX_CAPACITY, MAX_GRAPHS
from scheduler_core.errors import InvalidInput
from scheduler_core.measured import MeasuredOn
from scheduler_core.validation import require_int, require_list, require_mapping, require_number

MAX_LABEL = 200  # `device` and `mode`: a name, shown in every boot picker

T = TypeVar("T")


class DriftAchieved(TypedDict):
    prefill: int
    slowdown: float  # the graph's median under the drift over its undisturbed median


class DriftRecord(TypedDict):
    """The graphs a deliberately disturbed boot timed under competing work, and with what load."""

    capacities: list[int]
    load: int
    achieved: list[DriftAchieved]


class ProvenanceRecord(MeasuredOn):
    """What a boot says about itself to be comparable with another (`device.provenance`, then the
    capture's additions); where it measured (device, mode, host load) as the trade-off reads it."""

    torch: str
    cuda: str | None
    cudnn: int | None
    driver: str | None
    python: str
    dtype: str
    preset: str
    seed: int
    code_revision: str | None
    time: str
    pid: int
    process_started: str | None
    attention: NotRequired[dict[str, Any]]  # the attention kernel pinned and the ones observed
    gpu_state: NotRequired[dict[str, Any]]  # clocks, power, throttle before and after
    order: NotRequired[list[str]]  # the shapes in the order they were measured
    drift: NotRequired[DriftRecord | None]
    startup_s: NotRequired[float | None]  # a fresh boot process: spawn to torch imported
    boot_s: NotRequired[float]  # spawn to result
    repeats: NotRequired[int]  # samples timed per shape


@dataclass(frozen=True)
class Drift:
    """The graphs a deliberately disturbed boot timed under competing work (its catalog
    over-measures them) and the load it ran beside them."""

    capacities: tuple[int, ...]
    load: int | None

    @classmethod
    def parse(cls, value: Any, field: str) -> Drift:
        data = require_mapping(value, field)
        capacities = require_list(data.get("capacities"), f"{field}.capacities")
        if len(capacities) > MAX_GRAPHS:
            raise InvalidInput(f"{field}.capacities", f"has {len(capacities)} items, at most {MAX_GRAPHS}")
        load = data.get("load")
        return cls(
            tuple(
                require_int(c, f"{field}.capacities[{i}]", minimum=1, maximum=MAX_CAPACITY)
                for i, c in enumerate(capacities)
            ),
            None if load is None else require_int(load, f"{field}.load", minimum=0, maximum=1_000_000),
        )

    @property
    def label(self) -> str:
        """ "drifted 2048, 4096": how every page and picker marks such a boot."""
        return f"drifted {', '.join(map(str, self.capacities))}"


@dataclass(frozen=True)
class HostLoad:
    """The host's 1-minute load average and its cores as a capture began measuring (`host_load.before`):
    a CPU boot measured beside other work over-measures every graph."""

    load_average_1m: float
    cores: int

    @classmethod
    def parse(cls, value: Any, field: str) -> HostLoad:
        before = require_mapping(require_mapping(value, field).get("before"), f"{field}.before")
        averages = require_list(before.get("load_average"), f"{field}.before.load_average")
        if not averages:
            raise InvalidInput(f"{field}.before.load_average", "must list the 1, 5 and 15 minute load averages")
        return cls(
            require_number(averages[0], f"{field}.before.load_average[0]", minimum=0.0, maximum=1_000_000.0),
            require_int(before.get("cores"), f"{field}.before.cores", minimum=1, maximum=1_000_000),
        )

    @property
    def label(self) -> str:
        """ "load 7.90 on 2 cores": how the boots table says what a boot was measured beside."""
        return f"load {self.load_average_1m:.2f} on {self.cores} cores"


def _repeats(value: Any, field: str) -> int:
    return require_int(value, field, minimum=1, maximum=1_000_000)


def _label(value: Any, field: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_LABEL:
        raise InvalidInput(field, f"must be text of at most {MAX_LABEL} characters, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class Provenance:
    """The keys of a boot's provenance that pages read, each None when absent."""

    device: str | None = None
    mode: str | None = None
    drift: Drift | None = None
    host_load: HostLoad | None = None
    repeats: int | None = None

    # the keys typed here; others kept as given
    READ: ClassVar[tuple[str, ...]] = ("device", "mode", "drift", "host_load", "repeats")

    @classmethod
    def read(cls, stored: Any) -> Self:
        """A stored boot's provenance as pages read it: a key of the wrong type reads as absent."""
        return cls.typed(stored if isinstance(stored, Mapping) else {}, "provenance", strict=False)

    @classmethod
    def typed(cls, data: Mapping[str, Any], field: str, *, strict: bool) -> Self:
        """The read keys of `data` typed; strict: InvalidInput naming a key of the wrong type
        (`provenance.drift`), else that key reads as absent."""

        def key(name: str, parse: Callable[[Any, str], T]) -> T | None:
            if data.get(name) is None:
                return None
            try:
                return parse(data[name], f"{field}.{name}")
            except InvalidInput:
                if strict:
                    raise
                return None

        return cls(
            device=key("device", _label),
            mode=key("mode", _label),
            drift=key("drift", Drift.parse),
            host_load=key("host_load", HostLoad.parse),
            repeats=key("repeats", _repeats),
        )
