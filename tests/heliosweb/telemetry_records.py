"""Telemetry records and batches for tests, built from the one declaration (`helios_client.records`):
a field added there is a field these builders must be given here, or every telemetry test fails."""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import Any

from helios_client.records import SCHEMA, Batch, LaunchRecord, RequestRecord

NOW_MS = time.time() * 1000
SESSION = "0b5e3f0c-6c1e-4c5e-9a55-4b1f2f0d7a11"
LAUNCH = LaunchRecord(
    t_ms=NOW_MS, request=0, graph=512, start=0, end=300, padded=212, chooser="rule", ms=5.5, policy="cost", version=1
)
FINISHED = RequestRecord(
    t_ms=NOW_MS,
    request=0,
    prompt_tokens=300,
    ttft_ms=12.0,
    itl_ms=[2.0, 2.5],
    launches=[512],
    policy="cost",
    version=1,
)


def _built(base: LaunchRecord | RequestRecord, i: int, over: dict[str, Any]) -> dict[str, Any]:
    """`base` with request `i` and the declared fields in `over` replaced; any other key in `over`
    (a typo, `type`) is put in the dict as it is, so tests can send what the declaration refuses."""
    declared = {"request": i} | {k: v for k, v in over.items() if k in {f.name for f in fields(base)}}
    return {**replace(base, **declared).to_dict(), **{k: v for k, v in over.items() if k not in declared}}


def launch(i: int = 0, **over: Any) -> dict[str, Any]:
    return _built(LAUNCH, i, over)


def finished(i: int = 0, **over: Any) -> dict[str, Any]:
    return _built(FINISHED, i, over)


def body(records: list[Any], batch: int = 1, engine: str = "eng-1", session: str = SESSION, **over: Any) -> dict:
    """A batch as an engine posts it."""
    return {**Batch(SCHEMA, engine, session, batch, records).to_dict(), **over}


def engine_served(policy: str = "cost", n: int = 40, *, start_ms: float | None = None, version: int = 1) -> list:
    """The request records a real simulated engine (`scheduler_core.engine.EngineLoop`, clean
    catalog, default affine costs) posts for `n` Poisson requests under `policy`, on the wall clock
    from `start_ms` (default: two minutes before the call), built with `finished`: what a
    counterfactual replay reads back."""
    import itertools

    from scheduler_core.analyses.simulate import build_catalog
    from scheduler_core.engine import EngineLoop
    from scheduler_core.execution import AffineExecution
    from scheduler_core.request import Request
    from scheduler_core.scheduler import Arrival, SchedulerConfig
    from scheduler_core.traffic import TrafficShape, poisson_arrivals

    execution = AffineExecution()
    catalog = build_catalog({"catalog": "clean", "mixed_rows": [8, 32], "drift_factor": 1.6}, execution)
    arrivals = list(itertools.islice(poisson_arrivals(TrafficShape(20.0, 32, 6000, 2, 12, seed=3), 4096), n))
    loop = EngineLoop(
        catalog, execution, SchedulerConfig(policy, 32, 2), iter([*arrivals, Arrival(n, 1e15, Request(1), 1)])
    )
    loop.set_policy(policy, version)
    records = [r for until in range(0, 60_000, 1_000) for r in loop.advance(float(until)) if r["type"] == "request"]
    assert len(records) == n, "every request finishes within the minute"
    keys = ("prompt_tokens", "ttft_ms", "itl_ms", "launches", "policy", "version")
    start = time.time() * 1000 - 120_000 if start_ms is None else start_ms
    return [finished(r["request"], t_ms=start + r["t_ms"], **{k: r[k] for k in keys}) for r in records]
