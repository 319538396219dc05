"""Each job kind's views, by kind name: the one place that knows which module draws which kind."""

from __future__ import annotations

from . import boots, capacity, capture, engine, fuzz, numerics, pr22, pulse, replay, simulate, sweep, ttft, vllm_check
from .contract import JobData, KindViews, empty

VIEWS: dict[str, KindViews] = {
    "pr22": pr22.VIEWS,
    "sweep": sweep.VIEWS,
    "boots": boots.VIEWS,
    "fuzz": fuzz.VIEWS,
    "simulate": simulate.VIEWS,
    "capacity": capacity.VIEWS,
    "replay": replay.VIEWS,
    "capture": capture.VIEWS,
    "ttft": ttft.VIEWS,
    "numerics": numerics.VIEWS,
    "pulse": pulse.VIEWS,
    "engine": engine.VIEWS,
    "vllm-check": vllm_check.VIEWS,
}


def _nothing(job: JobData) -> list:
    return [empty("none", "No figures", f"no figures are declared for {job.kind} jobs")]


def views_for(kind: str) -> KindViews:
    return VIEWS.get(kind) or KindViews(_nothing)
