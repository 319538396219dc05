"""Real analysis runs on small parameters, shared by the figure, export and browser tests: what a
worker would store for a finished job of each kind (its params, result and events), without a worker."""

from __future__ import annotations

from functools import cache
from typing import Any

from heliosweb.jobs.registry import get_kind, job_kinds
from scheduler_core.analyses.replay import from_engine_records
from scheduler_core.errors import InvalidInput

from .telemetry_records import engine_served

_SERVED = from_engine_records(engine_served("cost", 16))  # a replay of what the simulated engine served

# Kinds whose example does not run here: vllm-check serves on a real vLLM (its end-to-end test, -m vllm).
ELSEWHERE = {"vllm-check"}
# Where a test wants more than a kind's declared example: a replay of what an engine served.
RICHER: dict[str, dict[str, Any]] = {"replay": {"trace": _SERVED[0], "served": [s.to_dict() for s in _SERVED[1]]}}


def small(kind: str) -> dict[str, Any]:
    """The parameters a test runs `kind` on: its declared example (`Analysis.example`), richer where said."""
    example = get_kind(kind).analysis.example
    assert example is not None, f"{kind} declares no example run"
    return {**example, **RICHER.get(kind, {})}


def _required(kind: str) -> dict[str, Any]:
    """What `kind` cannot run without (every other parameter has a default), from its example."""
    analysis = get_kind(kind).analysis
    try:
        analysis.validate({})
    except InvalidInput as missing:
        return {missing.field: (analysis.example or {})[missing.field]}
    return {}


# Every registered kind with an example that runs here, on small parameters, read from the registry:
# a new kind is run by the figure, export and browser tests by declaring it.
SMALL: dict[str, dict[str, Any]] = {
    name: small(name)
    for name, kind in job_kinds().items()
    if kind.analysis.example is not None and name not in ELSEWHERE
}
# What a kind cannot run without (a replay and a vllm-check need traffic), for tests that post one parameter.
REQUIRED: dict[str, dict[str, Any]] = {
    name: r for name, k in job_kinds().items() if k.analysis.example and (r := _required(name))
}


@cache
def finished(kind: str) -> tuple[dict[str, Any], dict[str, Any], tuple[dict[str, Any], ...]]:
    """(params, result, events) of a real run of `kind` on small parameters; events numbered from 1."""
    return run(kind, small(kind))


def run(kind: str, raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], tuple[dict[str, Any], ...]]:
    """(params, result, events) of a real run of `kind` on the parameters `raw`; events numbered from 1."""
    analysis = get_kind(kind).analysis
    params = analysis.validate(raw)
    events: list[dict[str, Any]] = []
    result = analysis.run(params, events.append)
    numbered = tuple({**e, "seq": i + 1} for i, e in enumerate(events))
    return params, result, numbered


def store(kind: str, *, status: str = "done", recipe: Any = None, raw: dict[str, Any] | None = None) -> Any:
    """A finished job of `kind` in the database, with the result and events of a real small run
    (or of a run on the parameters `raw`)."""
    from heliosweb.jobs.models import BenchmarkJob, JobEvent
    from heliosweb.jobs.registry import get_kind

    params, result, events = finished(kind) if raw is None else run(kind, raw)
    job = BenchmarkJob.objects.create(
        kind=kind,
        queue=get_kind(kind).queue,
        recipe=recipe,
        params=get_kind(kind).analysis.to_json(params),
        status=status,
        result=result if status == "done" else None,
        progress_done=1,
        progress_total=1,
        last_seq=len(events),
    )
    JobEvent.objects.bulk_create(
        JobEvent(job=job, seq=e["seq"], type=e["type"], data={k: v for k, v in e.items() if k not in ("seq", "type")})
        for e in events
    )
    return job
