"""Parsing one telemetry batch: every field checked, the first bad one named (`records[17].graph`),
before anything is stored. Kept flat and allocation-light: ingestion aims at 50,000 launch records
per second in one web process (`bench/engine_bench.py`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
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
_NUMBERS = (int, float)
_BATCH_FIELDS = {"engine", "batch", "boot", "records"}
_COMMON = ("t_ms", "request", "policy", "version")
LAUNCH_FIELDS = frozenset({"type", *_COMMON, "graph", "start", "end", "padded", "chooser", "ms"})
REQUEST_FIELDS = frozenset({"type", *_COMMON, "prompt_tokens", "ttft_ms", "itl_ms", "launches"})


@dataclass(frozen=True)
class Batch:
    engine: str
    batch: int
    boot: int | None
    records: list[dict[str, Any]]
    launches: int
    requests: int


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
    policies = {current_version: current_policy}
    launches = 0
    latest = now_ms + FUTURE_SLACK_MS
    for i, record in enumerate(records):
        if (
            type(record) is dict
            and record.get("type") == "launch"
            and _launch_ok(record, latest, current_version, policies)
        ):
            launches += 1
            continue
        f = f"records[{i}]"
        if not isinstance(record, dict):
            raise InvalidInput(f, f"must be an object, got {type(record).__name__}")
        kind = record.get("type")
        if kind == "launch":
            _check_launch(record, f)
            launches += 1
        elif kind == "request":
            _check_request(record, f)
        else:
            raise InvalidInput(f"{f}.type", f"must be 'launch' or 'request', got {kind!r}")
        _check_common(record, f, latest, current_version, policies)
    return Batch(engine, batch, boot, records, launches, len(records) - launches)


def _launch_ok(r: dict[str, Any], latest_ms: float, current_version: int, policies: dict[int, str]) -> bool:
    """The fast path: one expression that is True only for a valid launch record (most are); any
    False goes through the checks below, which name the bad field."""
    if r.keys() != LAUNCH_FIELDS:
        return False
    graph, start, end, padded, ms, t, version, policy = (
        r["graph"],
        r["start"],
        r["end"],
        r["padded"],
        r["ms"],
        r["t_ms"],
        r["version"],
        r["policy"],
    )
    return (
        type(graph) is int
        and type(start) is int
        and type(end) is int
        and type(padded) is int
        and 0 <= start < end
        and end - start <= graph
        and padded == graph - (end - start)
        and type(ms) in _NUMBERS
        and 0 <= ms < math.inf
        and type(t) in _NUMBERS
        and 0 <= t <= latest_ms
        and type(r["request"]) is int
        and r["request"] >= 0
        and type(version) is int
        and 1 <= version <= current_version
        and type(policy) is str
        and policy in POLICIES
        and policies.setdefault(version, policy) == policy
        and type(r["chooser"]) is str
        and 0 < len(r["chooser"]) <= 32
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
