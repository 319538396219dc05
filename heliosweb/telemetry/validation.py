"""Parsing one telemetry batch: every field checked against `helios_client.records`' declarations, the
first bad one named (`records[17].graph`). Flat and allocation-light: ingestion aims at 50,000 launch
records a second in one web process (`bench/engine_bench.py`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import eq, itemgetter, le, lt, sub
from typing import Any

from helios_client import records as schema

from scheduler_core.errors import InvalidInput
from scheduler_core.policies import POLICIES, policy_named
from scheduler_core.validation import require_list, require_mapping

MAX_RECORDS = schema.MAX_RECORDS
SCHEMA = schema.SCHEMA
MAX_BYTES = 5 * 1024 * 1024
FUTURE_SLACK_MS = 5 * 60_000  # engine clocks run a little ahead; more is a unit mistake
ENGINE_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")
SECONDS_NOT_MS = 1e11  # t_ms below this is before 1973: Unix seconds sent as milliseconds

_BATCH = schema.specs(schema.Batch)
_BATCH_REQUIRED = schema.required(schema.Batch)
_LAUNCH = schema.specs(schema.LaunchRecord)
LAUNCH_FIELDS = frozenset({"type", *_LAUNCH})
_LAUNCH_COLUMNS = itemgetter(*_LAUNCH)  # every declared launch field, a column each
_KEPT = tuple(list(_LAUNCH).index(name) for name in ("t_ms", "version", "graph", "padded"))

PolicyOf = Callable[[int], str | None]  # a version's policy, None when the recipe has no such version


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
    session: str
    batch: int
    boot: int | None
    version: int  # the batch's one policy version
    policy: str  # that version's policy
    records: list[dict[str, Any]]
    launches: Launches
    requests: list[dict[str, Any]]  # the request records, in batch order
    upgrade: dict[str, Any] | None = None  # what an engine on the previous schema is told (`schema_answer`)


@dataclass(frozen=True)
class Window:
    """What `t_ms` may be: not before the raw window (`oldest_ms`), at most FUTURE_SLACK_MS ahead."""

    now_ms: float
    oldest_ms: float

    @property
    def latest_ms(self) -> float:
        return self.now_ms + FUTURE_SLACK_MS

    def problem(self, t: float) -> str | None:
        if t > self.latest_ms:
            return "is more than 5 minutes in the future: t_ms is Unix time in milliseconds"
        if t < self.oldest_ms:
            hours = (self.now_ms - self.oldest_ms) / 3_600_000
            unit = " (this looks like Unix seconds, not milliseconds)" if t < SECONDS_NOT_MS else ""
            return f"is older than the raw window ({hours:g} h): t_ms is Unix time in milliseconds{unit}"
        return None


class _Versions:
    """The batch's one version and its policy, set by the first record that names them."""

    def __init__(self, current: int, policy_of: PolicyOf) -> None:
        self.current, self.policy_of = current, policy_of
        self.version: int | None = None
        self.policy = ""

    def check(self, version: int, policy: str, f: str) -> None:
        if self.version is None:
            if version > self.current:
                raise InvalidInput(f"{f}.version", f"this recipe has had versions 1 to {self.current}, not {version}")
            expected = self.policy_of(version)
            if expected is None:
                raise InvalidInput(f"{f}.version", f"this recipe has no recorded policy for version {version}")
            self.version, self.policy = version, expected
        if version != self.version:
            raise InvalidInput(
                f"{f}.version", f"a batch holds one policy version: records[0] is version {self.version}, not {version}"
            )
        if policy != self.policy:
            raise InvalidInput(f"{f}.policy", f"version {version} is policy {self.policy!r}, not {policy!r}")


def parse_batch(data: Any, *, current_version: int, policy_of: PolicyOf, window: Window) -> Batch:
    """A valid batch, or InvalidInput naming the first bad field. `version` must be one the recipe
    has had (1 .. current), one for the whole batch, with the policy it had (`policy_of`)."""
    body = require_mapping(data, "body")
    upgrade = _check_batch_fields(body, window)
    records = require_list(body["records"], "records")
    if not records:
        raise InvalidInput("records", "must hold at least one record")
    if len(records) > MAX_RECORDS:
        raise InvalidInput("records", f"has {len(records)} records, at most {MAX_RECORDS} per batch")
    launch_records = [r for r in records if type(r) is dict and r.get("type") == "launch"]
    others = (
        [r for r in records if type(r) is not dict or r.get("type") != "launch"]
        if len(launch_records) < len(records)
        else []
    )
    versions = _Versions(current_version, policy_of)
    columns = _launch_columns(launch_records)
    if not (columns is not None and _launches_ok(columns, window, versions) and _all_ok(others, window, versions)):
        # The columns failed: the first bad field in batch order is found record by record (which raises,
        # unless the columns' exact types were only too strict for an int or float subclass).
        versions = _Versions(current_version, policy_of)
        for i, record in enumerate(records):
            _check_record(record, f"records[{i}]", window, versions)
        columns = _launch_columns(launch_records)
        assert columns is not None  # every launch record has exactly LAUNCH_FIELDS
    assert versions.version is not None  # at least one record named it
    if others and launch_records:
        _check_finished_after_launches(records)
    launches = Launches(*(columns[i] for i in _KEPT))
    return Batch(
        body["engine"],
        body["session"],
        body["batch"],
        body.get("boot"),
        versions.version,
        versions.policy,
        records,
        launches,
        others,
        upgrade,
    )


def _check_finished_after_launches(records: list[dict[str, Any]]) -> None:
    """A request record's `t_ms` is when it finished, a launch's when it started: a request before
    one of its own launches was sent with another time (its arrival, say), shifting every latency."""
    started: dict[Any, tuple[float, int]] = {}
    for i, record in enumerate(records):
        if record["type"] == "launch":
            key = record["request"]
            if key not in started or record["t_ms"] > started[key][0]:
                started[key] = (record["t_ms"], i)
    for i, record in enumerate(records):
        launch = started.get(record["request"]) if record["type"] == "request" else None
        if launch is not None and record["t_ms"] < launch[0]:
            raise InvalidInput(
                f"records[{i}].t_ms",
                f"is {launch[0] - record['t_ms']:g} ms before its launch records[{launch[1]}] started: a request "
                "record's t_ms is when the request finished (its last token), not when it arrived",
            )


def _check_batch_fields(body: dict[str, Any], window: Window) -> dict[str, Any] | None:
    """The batch's own fields checked; what an engine on the previous schema is told, or None."""
    for key in body:
        if key not in _BATCH:
            raise InvalidInput(key, f"unknown field (expected one of {sorted(_BATCH)})")
    try:
        upgrade = schema.schema_answer(body.get("schema"), datetime.fromtimestamp(window.now_ms / 1000, UTC).date())
    except ValueError as exc:
        raise InvalidInput("schema", str(exc)) from None
    for name, rule in _BATCH.items():
        if name in ("records", "schema"):
            continue
        if name not in body:
            if name in _BATCH_REQUIRED:
                raise InvalidInput(name, "is required")
            continue
        if name == "boot" and body[name] is None:
            continue
        why = rule.problem(body[name])
        if why is not None:
            raise InvalidInput(name, why)
    if "records" not in body:
        raise InvalidInput("records", "is required")
    return upgrade


def _check_record(record: Any, f: str, window: Window, versions: _Versions) -> None:
    if not isinstance(record, dict):
        raise InvalidInput(f, f"must be an object, got {type(record).__name__}")
    problem = schema.record_problem(record)
    if problem is not None:
        name, why = problem
        raise InvalidInput(f"{f}.{name}" if name else f, why)
    late = window.problem(record["t_ms"])
    if late is not None:
        raise InvalidInput(f"{f}.t_ms", late)
    if record["type"] == "launch":
        start, end, graph = record["start"], record["end"], record["graph"]
        if end <= start or end - start > graph:
            raise InvalidInput(f"{f}.end", f"the chunk [{start}, {end}) is empty or does not fit graph {graph}")
        if record["padded"] != graph - (end - start):
            raise InvalidInput(f"{f}.padded", f"must be graph - (end - start) = {graph - (end - start)}")
    policy = policy_named(record["policy"], f"{f}.policy")
    versions.check(record["version"], policy, f)


def _all_ok(records: list[Any], window: Window, versions: _Versions) -> bool:
    try:
        for record in records:
            _check_record(record, "records", window, versions)
    except InvalidInput:
        return False
    return True


def _launch_columns(records: list[dict[str, Any]]) -> list[tuple[Any, ...]] | None:
    """The launch records' fields, a tuple each; None unless every record has exactly LAUNCH_FIELDS."""
    if not records:
        return [()] * len(_LAUNCH)
    if set(map(len, records)) != {len(LAUNCH_FIELDS)}:
        return None
    try:  # with "type" and every declared field, the records' keys are LAUNCH_FIELDS
        return list(zip(*map(_LAUNCH_COLUMNS, records)))
    except KeyError:
        return None


def _launches_ok(columns: list[tuple[Any, ...]], window: Window, versions: _Versions) -> bool:
    """Whether every launch record passes `_check_record`'s conditions, read a column at a time in C."""
    if not columns[0]:
        return True
    named = dict(zip(_LAUNCH, columns))
    if not all(rule.column_ok(named[name]) for name, rule in _LAUNCH.items()):
        return False
    t, start, end, graph, padded = (named[k] for k in ("t_ms", "start", "end", "graph", "padded"))
    if not (
        min(t) >= window.oldest_ms
        and max(t) <= window.latest_ms
        and all(map(lt, start, end))
        and all(map(le, map(sub, end, start), graph))
        and all(map(eq, padded, map(sub, graph, map(sub, end, start))))
    ):
        return False
    pairs = set(zip(named["version"], named["policy"]))
    if len(pairs) != 1:
        return False
    version, policy = pairs.pop()
    if policy not in POLICIES:
        return False
    try:
        versions.check(version, policy, "records")
    except InvalidInput:
        return False
    return True
