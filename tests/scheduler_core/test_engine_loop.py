"""The engine loop's telemetry tags: a request is planned, and tagged, by the version that planned
its first chunk, even when the policy changes before it finishes."""

import pytest

from scheduler_core.analyses.simulate import build_catalog
from scheduler_core.engine import EngineLoop
from scheduler_core.execution import AffineExecution
from scheduler_core.planner import plan
from scheduler_core.request import Request
from scheduler_core.scheduler import Arrival, SchedulerConfig

EXECUTION = AffineExecution()
CATALOG = build_catalog({"catalog": "clean", "mixed_rows": [8, 32], "drift_factor": 1.6}, EXECUTION)


def test_a_request_spanning_a_policy_change_keeps_the_version_that_planned_its_first_chunk():
    arrivals = [Arrival(0, 0.0, Request(14000), 4), Arrival(1, 5000.0, Request(14000), 4)]
    never = Arrival(2, 1e15, Request(1), 1)
    engine = EngineLoop(CATALOG, EXECUTION, SchedulerConfig("cost", 32, 2), iter([*arrivals, never]))
    engine.set_policy("cost", 1)
    before = engine.advance(20.0)  # request 0 has made its first prefill launch, no more
    assert [(r["type"], r["request"], r["version"]) for r in before] == [("launch", 0, 1)]
    engine.set_policy("rule", 2)
    records = before + engine.advance(20_000.0)
    requests = {r["request"]: r for r in records if r["type"] == "request"}
    alone = {name: list(plan(name, CATALOG, Request(14000), EXECUTION).graphs) for name in ("cost", "rule")}
    assert alone["cost"] != alone["rule"]  # so a sequence mixing the two would show
    # Request 0 finished under v2 yet was planned by cost v1 throughout: its sequence is cost's alone.
    assert (requests[0]["policy"], requests[0]["version"], requests[0]["launches"]) == ("cost", 1, alone["cost"])
    assert (requests[1]["policy"], requests[1]["version"], requests[1]["launches"]) == ("rule", 2, alone["rule"])
    for r in records:
        if r["type"] == "launch":  # each launch tagged as its request
            assert (r["policy"], r["version"]) == (requests[r["request"]]["policy"], requests[r["request"]]["version"])
    assert (engine.policy, engine.version) == ("rule", 2)


def test_an_engine_offered_more_than_it_serves_is_judged_overloaded_and_one_that_keeps_up_is_not():
    from scheduler_core.traffic import TrafficShape

    loads = {}
    for rate in (4.0, 60.0):
        traffic = TrafficShape(rate, 32, 8000, 16, 64, 0.0, 1)
        engine = EngineLoop(CATALOG, EXECUTION, SchedulerConfig("cost", 32, 2), traffic)
        engine.set_policy("cost", 1)
        engine.advance(30_000.0)  # 30 s of the engine's clock
        loads[rate] = engine.load()
    assert loads[4.0].judged and not loads[4.0].overloaded
    assert loads[4.0].sustained_per_s == pytest.approx(loads[4.0].offered_per_s, rel=0.2)
    assert loads[60.0].overloaded and loads[60.0].sustained_per_s < 0.8 * loads[60.0].offered_per_s
