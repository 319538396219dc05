"""A boot's provenance, typed where it is read.

Provenance is the JSON a capture writes about itself (device, libraries, process, seed, drift) or
an upload brings. Pages read five of its keys: `device`, `mode`, `drift` (which graphs were
timed under competing work, and with what load), `host_load` (the machine's load when it was
measured) and `repeats` (the samples per shape). Those keys are declared here with the types the
pages read; `Provenance.parse` holds an upload and a capture's result to them (a
`{"drift": "x"}` answered 201 and then broke every page that lists boots, for good, since boots
are append-only), and `Provenance.read` is how every page reads a stored boot: a key of the wrong
type, stored before this check, reads as absent instead of raising. Other keys are kept as given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from heliosweb.common.bounds import check_text
from scheduler_core.catalog import MAX_CAPACITY, MAX_GRAPHS
from scheduler_core.errors import InvalidInput
from scheduler_core.validation import require_int, require_list, require_mapping, require_number, text_problem

MAX_PROVENANCE_BYTES = 64 * 1024  # where a boot came from, not a place for its data
MAX_LABEL = 200  # `device` and `mode`: a name, shown in every boot picker

T = TypeVar("T")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # a NUL, a surrogate (one left alone in a str)


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


def _clean_text(value: Any) -> Any:
    """`value` with every string's NUL and lone surrogates (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value) if text_problem(value) else value
    if isinstance(value, dict):
        return {_clean_text(k): _clean_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_text(v) for v in value]
    return value


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

    @classmethod
    def parse(cls, value: Any, field: str = "provenance") -> dict[str, Any]:
        """`value` (None: `{}`) as it may be stored: an object of at most MAX_PROVENANCE_BYTES as
        JSON, text every database stores, and the keys pages read of their declared types; or
        InvalidInput naming the key (`provenance.drift`)."""
        data = require_mapping({} if value is None else value, field)
        size = len(json.dumps(data).encode())
        if size > MAX_PROVENANCE_BYTES:
            raise InvalidInput(field, f"is {size:,} bytes as JSON, at most {MAX_PROVENANCE_BYTES:,} allowed")
        check_text(data, field)
        cls._typed(data, field, strict=True)
        return data

    @classmethod
    def read(cls, stored: Any) -> Provenance:
        """A stored boot's provenance as pages read it: a key of the wrong type reads as absent."""
        return cls._typed(stored if isinstance(stored, dict) else {}, "provenance", strict=False)

    @classmethod
    def repair(cls, stored: Any) -> dict[str, Any] | None:
        """A provenance stored before `parse` checked it, made to pass it: a read key of the wrong
        type moves under `unvalidated`, text no database stores gets U+FFFD for its bad characters.
        None when it passes already (the data migration changes only rows that need it)."""
        try:
            cls.parse(stored)
            return None
        except InvalidInput:
            pass
        data = _clean_text(stored if isinstance(stored, dict) else {"unvalidated": stored})
        typed = cls._typed(data, "provenance", strict=False)
        moved = {
            name: data.pop(name)
            for name in ("device", "mode", "drift", "host_load", "repeats")
            if name in data and getattr(typed, name) is None
        }
        if moved:
            data["unvalidated"] = {
                **(data.get("unvalidated") if isinstance(data.get("unvalidated"), dict) else {}),
                **moved,
            }
        if len(json.dumps(data).encode()) > MAX_PROVENANCE_BYTES:
            data = {"unvalidated": f"provenance over {MAX_PROVENANCE_BYTES:,} bytes, dropped"}
        return data

    @classmethod
    def _typed(cls, data: dict[str, Any], field: str, *, strict: bool) -> Provenance:
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
