"""The job kinds this service can run: scheduler_core's analyses (queue `sim`), gpu_runner's
(queue `gpu`, when that package is importable; importing it must not import torch), vllm_loop's
(`vllm-check`, queue `gpu`: it runs a real vLLM as a subprocess and wants the machine to itself), and `pulse`,
a diagnostic that streams events at a set rate to check and benchmark the live path; apps above
this one add theirs with `register_kind` (simengine's `engine`, queue `engine`)."""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, TypedDict

from django.conf import settings

from heliosweb.recipes.models import Recipe
from scheduler_core.analyses import ANALYSES as SIM_ANALYSES
from scheduler_core.analyses.contract import Analysis, Emit, progress
from scheduler_core.analyses.params import FloatParam, IntParam
from scheduler_core.errors import InvalidInput
from scheduler_core.events import ProgressEvent

log = logging.getLogger(__name__)


# A run estimated above this share of its analysis's cap (a cap is sized to about an hour) is long.
LONG_WORK_SHARE = 0.05


@dataclass(frozen=True)
class RunContext:
    """What the runner tells a kind that serves a recipe (`JobKind.serve`) beyond its declared
    params: which job it runs as (an engine's name and token) and the job's recipe."""

    job_id: int
    recipe: Recipe | None


@dataclass(frozen=True)
class JobKind:
    name: str
    queue: str
    analysis: Analysis
    # What the kind needs of its recipe, checked at submission with the validated params (a
    # simulated engine: its boot usable), so the worker never finds it out.
    check_recipe: Callable[[dict[str, Any], Recipe | None], None] | None = None
    # Where a large run goes instead (`queue_for`); None: every run goes to `queue`.
    long_queue: str | None = None
    # A kind that needs its job's context (the simulated engine: its recipe and job id) runs
    # through this instead of `analysis.run`, which then stands for a run with no job (the CLI).
    # It returns the analysis' declared result type, as `analysis.run` does.
    serve: Callable[[RunContext, dict[str, Any], Emit], Any] | None = None

    @property
    def summary(self) -> str:
        return self.analysis.summary

    def run(self, context: RunContext, params: dict[str, Any], emit: Emit) -> dict[str, Any]:
        if self.serve is not None:
            return self.serve(context, params, emit)
        return self.analysis.run(params, emit)

    def params_spec(self) -> list[dict[str, Any]]:
        return [p.to_dict() for p in self.analysis.params]

    def time_limit_s(self, params: dict[str, Any]) -> float | None:
        """Every job's hard limit (`HELIOS_JOB_TIME_LIMIT_SECONDS`); past it the job fails "time limit
        exceeded". A service that runs until stopped (a simulated engine): its own duration, if any."""
        duration_s = self.analysis.service_duration_s
        if duration_s is not None:
            seconds = duration_s(params)
            return seconds + 60 if seconds else None
        return settings.HELIOS_JOB_TIME_LIMIT_SECONDS

    def queue_for(self, params: dict[str, Any]) -> str:
        """A large run goes to its `long_queue` (a sim run to `sim_long`), served by a worker of its
        own, so long runs never hold every `sim` slot and short ones keep starting at once."""
        if self.long_queue and self.analysis.work(params) > self.analysis.max_work * LONG_WORK_SHARE:
            return self.long_queue
        return self.queue


class PulseEvent(TypedDict):
    """pulse: event `i`, emitted at wall-clock `ts` (s), `elapsed_s` after the run started."""

    type: Literal["measurement"]
    name: str
    i: int
    ts: float
    elapsed_s: float


class PulseResult(TypedDict):
    events: int
    rate: float
    seconds: float


def _pulse(params: dict[str, Any], emit: Emit) -> PulseResult:
    count, rate = params["count"], params["rate"]
    start = time.monotonic()
    step = max(1, count // 100)
    progress(emit, 0, count, "starting")
    for i in range(count):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        emit({"type": "measurement", "name": "pulse", "i": i, "ts": time.time(), "elapsed_s": time.monotonic() - start})
        if (i + 1) % step == 0 or i + 1 == count:
            progress(emit, i + 1, count, f"{i + 1} of {count} events")
    return {"events": count, "rate": rate, "seconds": round(time.monotonic() - start, 3)}


PULSE = Analysis(
    name="pulse",
    summary="Diagnostic: stream `count` measurement events at `rate` per second (checks the live path).",
    params=(
        IntParam("count", 200, "number of events", minimum=1, maximum=1_000_000),
        FloatParam("rate", 100.0, "events per second", minimum=0.1, maximum=5000.0),
    ),
    run=_pulse,
    work=lambda p: int(p["count"] / p["rate"]),
    max_work=3600,  # seconds
    events=(ProgressEvent, PulseEvent),
    result=PulseResult,
    example={"count": 20, "rate": 2000},
)


def _gpu_analyses() -> dict[str, Analysis]:
    try:
        module = importlib.import_module("gpu_runner.analyses")
    except ImportError as exc:
        log.info("gpu_runner.analyses not importable (%s): no gpu job kinds", exc)
        return {}
    return dict(getattr(module, "ANALYSES", {}))


def _vllm_analyses() -> dict[str, Analysis]:
    """vllm_loop's: importing it imports no vLLM (it runs vLLM's own virtualenv as a subprocess)."""
    from vllm_loop.check import ANALYSES

    return dict(ANALYSES)


_REGISTERED: dict[str, JobKind] = {}


def register_kind(kind: JobKind) -> None:
    """A kind declared by an app above this one (the simulated engine, simengine's), at app ready."""
    _REGISTERED[kind.name] = kind
    job_kinds.cache_clear()


@lru_cache(maxsize=1)
def job_kinds() -> dict[str, JobKind]:
    kinds: dict[str, JobKind] = dict(_REGISTERED)
    for name, analysis in SIM_ANALYSES.items():
        kinds[name] = JobKind(name, "sim", analysis, long_queue="sim_long")
    for name, analysis in {**_gpu_analyses(), **_vllm_analyses()}.items():
        kinds.setdefault(name, JobKind(name, "gpu", analysis))
    kinds.setdefault(PULSE.name, JobKind(PULSE.name, "sim", PULSE, long_queue="sim_long"))
    return kinds


def get_kind(name: object) -> JobKind:
    kinds = job_kinds()
    if not isinstance(name, str) or name not in kinds:
        raise InvalidInput("kind", f"unknown job kind {name!r} (expected one of {sorted(kinds)})")
    return kinds[name]
