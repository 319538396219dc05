"""Parsing one telemetry batch: every field checked, the first bad one named (`records[17].graph`),
before anything is stored. Kept flat and allocation-light: ingestion aims at 50,000 launch records
per second in one web process (`bench/engine_bench.py`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from itertools import repeat
from operator import eq, itemgetter, le, lt, sub
from typing import Any

from scheduler_core.errors import InvalidInput
from scheduler_core.policies import POLICIES
from scheduler_core.validation import reject_unknown_keys, require_int, require_list, require_mapping

MAX_RECORDS = 10_000
MAX_BYTES = 5 * 1024 * 1024
MAX_ITL_VALUES = 100_000  # tokens of one request
MAX_PREFILL_LAUNCHES = 10_000  # chunks of one request
FUTURE_SLACK_MS = 5 * 60_000  # engine clocks run a little ahead; more is a unit mistake
ENGINE_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")
_INT = {int}
_NUMBER = {int, float}
_STR = {str}
_BATCH_FIELDS = {"engine", "batch", "boot", "records"}
_COMMON = ("t_ms", "request", "policy", "version")
LAUNCH_FIELDS = frozenset({"type", *_COMMON, "graph", "start", "end", "padded", "chooser", "ms"})
REQUEST_FIELDS = frozenset({"type", *_COMMON, "prompt_tokens", "ttft_ms", "itl_ms", "launches"})


@dataclass(frozen=True)
class Launches:
    """What the fold and the live frame read of a batch's launch records, a column each, in batch order."""

    t_ms: tuple[float, ...]
    version: tuple[int, ...]
    graph: tuple[int, ...]
    padded: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.t_ms)


@dataclass(frozen=True)
class Batch:
    engine: str
    batch: int
    boot: int | None
    records: list[dict[str, Any]]
    launches: Launches
    requests: list[dict[str, Any]]  # the request records, in batch order
    policies: dict[int, str]  # each version's one policy (and the current version's)


def parse_batch(data: Any, *, current_version: int, current_policy: str, now_ms: float) -> Batch:
    """A valid batch, or InvalidInput naming the first bad field. `version` must be one the recipe
    has had (1 .. current); one version is one policy throughout the batch (the current one for
    the current version)."""
    body = require_mapping(data, "body")
    reject_unknown_keys(body, _BATCH_FIELDS, "")
    engine = body.get("engine")
    if not isinstance(engine, str) or not ENGINE_NAME.match(engine):
        raise InvalidInput("engine", "must be 1-64 letters, digits, '-' or '_'")
    batch = require_int(body.get("batch"), "batch", minimum=0, maximum=2**63 - 1)
    boot = body.get("boot")
    if boot is not None:
        boot = require_int(boot, "boot", minimum=1)
    records = require_list(body.get("records"), "records")
    if not records:
        raise InvalidInput("records", "must hold at least one record")
    if len(records) > MAX_RECORDS:
        raise InvalidInput("records", f"has {len(records)} records, at most {MAX_RECORDS} per batch")
    latest = now_ms + FUTURE_SLACK_MS
    launch_records = [r for r in records if type(r) is dict and r.get("type") == "launch"]
    others = (
        [r for r in records if type(r) is not dict or r.get("type") != "launch"]
        if len(launch_records) < len(records)
        else []
    )
    policies = {current_version: current_policy}
    columns = _launch_columns(launch_records)
    if not (
        columns is not None
        and _launches_ok(columns, latest, current_version, policies)
        and _all_ok(others, latest, current_version, policies)
    ):
        # Launch records are checked a column at a time above; the first bad field in batch order
        # is found by reading the records one by one (this raises, unless only the columns' exact
        # types were too strict for a caller's int or float subclass).
        policies = {current_version: current_policy}
        for i, record in enumerate(records):
            _check_record(record, f"records[{i}]", latest, current_version, policies)
        columns = _launch_columns(launch_records)
        assert columns is not None  # every launch record has exactly LAUNCH_FIELDS
    launches = Launches(*columns[:4])
    return Batch(engine, batch, boot, records, launches, others, policies)


def _check_record(record: Any, f: str, latest_ms: float, current_version: int, policies: dict[int, str]) -> None:
    if not isinstance(record, dict):
        raise InvalidInput(f, f"must be an object, got {type(record).__name__}")
    kind = record.get("type")
    if kind == "launch":
        _check_launch(record, f)
    elif kind == "request":
        _check_request(record, f)
    else:
        raise InvalidInput(f"{f}.type", f"must be 'launch' or 'request', got {kind!r}")
    _check_common(record, f, latest_ms, current_version, policies)


def _all_ok(records: list[Any], latest_ms: float, current_version: int, policies: dict[int, str]) -> bool:
    try:
        for record in records:
            _check_record(record, "records", latest_ms, current_version, policies)
    except InvalidInput:
        return False
    return True


# t_ms, version, graph, padded (what Launches keeps), then what is only checked.
_LAUNCH_COLUMNS = itemgetter("t_ms", "version", "graph", "padded", "start", "end", "ms", "request", "policy", "chooser")


def _launch_columns(records: list[dict[str, Any]]) -> list[tuple[Any, ...]] | None:
    """The launch records' fields, a tuple per field (`_LAUNCH_COLUMNS`); None unless every record
    has exactly LAUNCH_FIELDS."""
    if not records:
        return [()] * len(LAUNCH_FIELDS - {"type"})
    if set(map(len, records)) != {len(LAUNCH_FIELDS)}:
        return None
    try:  # with "type" and these ten, the records' keys are LAUNCH_FIELDS
        return list(zip(*map(_LAUNCH_COLUMNS, records)))
    except KeyError:
        return None


def _launches_ok(
    columns: list[tuple[Any, ...]], latest_ms: float, current_version: int, policies: dict[int, str]
) -> bool:
    """Whether every launch record is valid, the same conditions as `_check_launch` and
    `_check_common`, read a column at a time by C loops (`map`, `set`, `min`) instead of a Python
    call per record. Adds their versions' policies to `policies`."""
    t, version, graph, padded, start, end, ms, request, policy, chooser = columns
    if not t:
        return True
    ok = (
        set(map(type, graph)) == _INT
        and set(map(type, start)) == _INT
        and set(map(type, end)) == _INT
        and set(map(type, padded)) == _INT
        and min(start) >= 0
        and all(map(lt, start, end))
        and all(map(le, map(sub, end, start), graph))
        and all(map(eq, padded, map(sub, graph, map(sub, end, start))))
        and _finite_non_negative(ms)
        and _finite_non_negative(t)
        and max(t) <= latest_ms
        and set(map(type, request)) == _INT
        and min(request) >= 0
        and set(map(type, version)) == _INT
        and min(version) >= 1
        and max(version) <= current_version
        and set(map(type, policy)) == _STR
        and set(map(type, chooser)) == _STR
        and min(map(len, chooser)) > 0
        and max(map(len, chooser)) <= 32
    )
    return ok and all(p in POLICIES and policies.setdefault(v, p) == p for v, p in set(zip(version, policy)))


def _finite_non_negative(values: tuple[Any, ...]) -> bool:
    """Every value an int or float, 0 <= value < inf (NaN fails both comparisons)."""
    return (
        set(map(type, values)) <= _NUMBER and all(map(le, repeat(0), values)) and all(map(lt, values, repeat(math.inf)))
    )


def _check_common(
    record: dict[str, Any], f: str, latest_ms: float, current_version: int, policies: dict[int, str]
) -> None:
    t = _number(record, "t_ms", f)
    if t > latest_ms:
        raise InvalidInput(f"{f}.t_ms", "is more than 5 minutes in the future: t_ms is Unix time in milliseconds")
    _int(record, "request", f, 0)
    version = _int(record, "version", f, 1)
    if version > current_version:
        raise InvalidInput(f"{f}.version", f"this recipe has had versions 1 to {current_version}, not {version}")
    policy = record.get("policy")
    if type(policy) is not str or policy not in POLICIES:  # a list would make `in` raise TypeError
        raise InvalidInput(f"{f}.policy", f"unknown policy {policy!r} (expected one of {sorted(POLICIES)})")
    expected = policies.setdefault(version, policy)
    if policy != expected:
        raise InvalidInput(f"{f}.policy", f"version {version} is policy {expected!r}, not {policy!r}")


def _check_launch(record: dict[str, Any], f: str) -> None:
    if record.keys() - LAUNCH_FIELDS or len(record) != len(LAUNCH_FIELDS):
        _name_key(record, LAUNCH_FIELDS, f)
    graph = _int(record, "graph", f, 1)
    start = _int(record, "start", f, 0)
    end = _int(record, "end", f, start + 1)
    if end - start > graph:
        raise InvalidInput(f"{f}.end", f"the chunk [{start}, {end}) does not fit graph {graph}")
    if _int(record, "padded", f, 0) != graph - (end - start):
        raise InvalidInput(f"{f}.padded", f"must be graph - (end - start) = {graph - (end - start)}")
    chooser = record["chooser"]
    if not isinstance(chooser, str) or not 0 < len(chooser) <= 32:
        raise InvalidInput(f"{f}.chooser", "must be a name of at most 32 characters")
    _number(record, "ms", f)


def _check_request(record: dict[str, Any], f: str) -> None:
    if record.keys() - REQUEST_FIELDS or len(record) != len(REQUEST_FIELDS):
        _name_key(record, REQUEST_FIELDS, f)
    _int(record, "prompt_tokens", f, 1)
    _number(record, "ttft_ms", f)
    itl = record["itl_ms"]
    if not isinstance(itl, list) or len(itl) > MAX_ITL_VALUES:
        raise InvalidInput(f"{f}.itl_ms", f"must be a list of at most {MAX_ITL_VALUES} gaps (ms)")
    for j, gap in enumerate(itl):
        if type(gap) not in (int, float) or not 0 <= gap < math.inf:
            raise InvalidInput(f"{f}.itl_ms[{j}]", f"must be a finite number >= 0, got {gap!r}")
    launches = record["launches"]
    if not isinstance(launches, list) or not 0 < len(launches) <= MAX_PREFILL_LAUNCHES:
        raise InvalidInput(f"{f}.launches", "must list the graph of each prefill launch, in order (1 to 10,000)")
    for j, graph in enumerate(launches):
        if type(graph) is not int or graph < 1:
            raise InvalidInput(f"{f}.launches[{j}]", f"must be a graph capacity (an integer >= 1), got {graph!r}")


def _name_key(record: dict[str, Any], expected: frozenset[str], f: str) -> None:
    reject_unknown_keys(record, set(expected), f)
    missing = sorted(expected - record.keys())
    raise InvalidInput(f"{f}.{missing[0]}", "is required")


def _int(record: dict[str, Any], key: str, f: str, minimum: int) -> int:
    value = record.get(key)
    if type(value) is not int or value < minimum:
        raise InvalidInput(f"{f}.{key}", f"must be an integer >= {minimum}, got {value!r}")
    return value


def _number(record: dict[str, Any], key: str, f: str) -> float:
    value = record.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < math.inf:
        raise InvalidInput(f"{f}.{key}", f"must be a finite number >= 0, got {value!r}")
    return float(value)
