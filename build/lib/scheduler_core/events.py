"""The events analyses emit, as typed records with a `type` discriminator.

Each analysis declares the records it may emit (`Analysis.events`); a listener (the CLI's
progress bar, the web's job page) reads fields by these names only. `conforms` checks an emitted
event against the declaration, so a renamed or missing field fails a test, not a user's page.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypedDict, get_type_hints

from .errors import InvalidInput
from .typed_json import record_keys


class ProgressEvent(TypedDict):
    """How far a run is: `done` of `total` work units, and what it is doing."""

    type: Literal["progress"]
    done: int
    total: int
    message: str


class LaunchRecord(TypedDict):
    """One solo prefill launch of a plan: graph `graph` carries tokens [start, end)."""

    graph: int
    start: int
    end: int
    chooser: str
    predicted_ms: float
    true_ms: float | None


class PlanSide(TypedDict):
    """One policy's plan of one pr22 arm; `chunks` are its launches in order (`LaunchRecord`s)."""

    launches: int
    ttft_ms: float
    graphs: list[int]
    padded_tokens: int
    chunks: list[LaunchRecord]


class Arm(TypedDict):
    """pr22: one arm (prompt x catalog), cost before and rule after, and rule - cost TTFT."""

    arm: str
    prompt_tokens: int
    catalog: str
    cost: PlanSide
    rule: PlanSide
    delta_ms: float


class ArmResultEvent(Arm):
    """pr22: one arm planned by both policies, announced as it lands (the result's `arms` entry)."""

    type: Literal["arm_result"]


class StepChunk(TypedDict):
    graph: int
    start: int
    end: int
    chooser: str


class StepLaunchEvent(TypedDict):
    """simulate: one launch of the multi-lane loop (the first `launch_events` of each policy)."""

    type: Literal["launch"]
    policy: str
    index: int
    kind: str
    prefill: int
    decode: int
    lane: int | None
    chunk: StepChunk | None
    decode_lanes: list[int]
    start_ms: float
    end_ms: float
    predicted_ms: float


class PolicyResultEvent(TypedDict):
    """simulate: one policy's summary over the traffic (the result's entry without per-request rows)."""

    type: Literal["policy_result"]
    policy: str
    stalled: dict[str, int] | None
    finished: int
    ttft_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    itl_quantiles_ms: list[float]
    launches: dict[str, int]
    padded_prefill_tokens: int
    padded_prefill_ms: float
    padded_decode_rows: int
    end_ms: float


def event_type(record: type) -> str:
    """The discriminator value a record declares (`Literal["progress"]` -> "progress")."""
    return get_type_hints(record)["type"].__args__[0]  # type: ignore[no-any-return]


def conforms(event: Mapping[str, Any], records: Iterable[type]) -> None:
    """Raise InvalidInput unless `event` is one of `records`: a declared type, every field present, none extra."""
    by_type = {event_type(r): r for r in records}
    kind = event.get("type")
    if kind not in by_type:
        raise InvalidInput("type", f"undeclared event type {kind!r} (declared: {sorted(by_type)})")
    required, known = record_keys(by_type[kind])
    missing = sorted(required - set(event))
    if missing:
        raise InvalidInput(missing[0], f"missing from a {kind!r} event")
    extra = sorted(set(event) - known)
    if extra:
        raise InvalidInput(extra[0], f"not a field of a {kind!r} event")
