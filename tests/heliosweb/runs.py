"""Real analysis runs on small parameters, shared by the figure, export and browser tests: what a
worker would store for a finished job of each kind (its params, result and events), without a worker."""

from __future__ import annotations

from functools import cache
from typing import Any

from heliosweb.jobs.registry import get_kind
from scheduler_core.analyses.replay import from_engine_records

from .telemetry_records import engine_served

_SERVED = from_engine_records(engine_served("cost", 16))  # a replay of what the simulated engine served

# What a kind cannot run without (every other parameter has a default): a replay and a vllm-check
# need traffic.
_TWO_REQUESTS = (
    '{"arrival_ms": 0, "prompt_tokens": 900, "output_tokens": 4}\n'
    '{"arrival_ms": 30, "prompt_tokens": 5000, "output_tokens": 3}\n'
)
REQUIRED: dict[str, dict[str, Any]] = {"replay": {"trace": _TWO_REQUESTS}, "vllm-check": {"trace": _TWO_REQUESTS}}

SMALL: dict[str, dict[str, Any]] = {
    "pr22": {},
    "sweep": {"count": 10, "prompt_max": 9000},
    "boots": {"boots": 6, "prompts": [3504, 14000], "sigma": 0.2},
    "fuzz": {"cases": 60, "seed": 1, "prompt_max": 512},
    "simulate": {"requests": 12, "prompt_max": 6000, "output_min": 4, "output_max": 12, "launch_events": 30},
    "capacity": {"requests": 16, "steps": 3, "repeats": 2, "prompt_max": 4000, "output_max": 20, "rate_max_per_s": 40},
    "replay": {"trace": _SERVED[0], "served": [s.to_dict() for s in _SERVED[1]]},
    "pulse": {"count": 20, "rate": 2000},
    "capture": {
        "capacities": [16, 32],
        "decode_rows": [2],
        "graphs": "prefill+decode",
        "repeats": 1,
        "boots": 2,
        "device": "cpu",
        "drift_capacities": [32],
        "drift_load": 1,
    },
    "ttft": {"capacities": [16, 32, 64], "repeats": 1, "runs": 1, "prompt_tokens": [100], "device": "cpu"},
    "numerics": {"capacities": [16, 32, 64], "repeats": 1, "prompt_tokens": 150, "device": "cpu"},
}


@cache
def finished(kind: str) -> tuple[dict[str, Any], dict[str, Any], tuple[dict[str, Any], ...]]:
    """(params, result, events) of a real run of `kind` on small parameters; events numbered from 1."""
    return run(kind, SMALL[kind])


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
