"""Speed of scheduler_core against the issue's targets, on one core. Prints figures next to the
targets; it never fails on timing (the machines vary), so read it, don't gate on it.

    python bench/scheduler_bench.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduler_core.analyses import ANALYSES
from scheduler_core.analyses.contract import ignore_events
from scheduler_core.execution import AffineExecution, measured_catalog
from scheduler_core.planner import plan, plan_launches
from scheduler_core.policies import CostPolicy, PrefillState, RulePolicy
from scheduler_core.request import Request

LONG_PROMPT = 131_072
EXECUTION = AffineExecution()
CATALOG = measured_catalog(EXECUTION)
REQUEST = Request(LONG_PROMPT)


def report(name: str, value: float, unit: str, target: float) -> None:
    verdict = "ok" if value <= target else "MISSES"
    print(f"{name:<52} {value:>10.2f} {unit:<3} target <= {target:g} {unit}  {verdict}")


def p50_of(samples: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(samples))


def decision_p50_us(policy: CostPolicy | RulePolicy) -> float:
    """Each decision timed on its own over the long prompt's positions; for `cost`, once the
    catalog's table exists (planning the prompt first builds it)."""
    states = [PrefillState(CATALOG, REQUEST, l.start) for l in plan_launches(policy, CATALOG, REQUEST)]
    times = []
    for _ in range(200):
        for state in states:
            t = time.perf_counter_ns()
            policy.choose(state)
            times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1e3


def cost_decision_amortised_us() -> float:
    """A fresh policy plans the long prompt: its cost table built once, divided over its decisions."""

    def once() -> float:
        policy = CostPolicy()
        t = time.perf_counter()
        launches = plan_launches(policy, CATALOG, REQUEST)
        return (time.perf_counter() - t) / len(launches) * 1e6

    return p50_of(30, once)


def plan_ms(policy_cls: type[CostPolicy] | type[RulePolicy]) -> float:
    """A cold plan: a fresh policy (no cached table), with true costs, as the `plan` command does."""

    def once() -> float:
        t = time.perf_counter()
        plan(policy_cls(), CATALOG, REQUEST, EXECUTION)
        return (time.perf_counter() - t) * 1e3

    return p50_of(30, once)


def analysis_s(name: str, params: dict) -> float:
    analysis = ANALYSES[name]
    validated = analysis.validate(params)
    t = time.perf_counter()
    analysis.run(validated, ignore_events)
    return time.perf_counter() - t


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print(
        f"scheduler_core bench, one core, Python {sys.version.split()[0]}, default catalog, {LONG_PROMPT:,}-token prompt"
    )
    report("rule decision p50", decision_p50_us(RulePolicy()), "us", 5)
    # The cost table is built once per catalog (once per boot in an engine) and shared by every
    # request after that; the first line is the decision with that table amortised, the second
    # charges one whole cold build to a single plan's decisions, the worst case.
    report("cost decision p50, table amortised across requests", decision_p50_us(CostPolicy()), "us", 50)
    report("cost decision mean within one cold plan (worst case)", cost_decision_amortised_us(), "us", 50)
    report("plan 131,072 tokens, rule", plan_ms(RulePolicy), "ms", 5)
    report("plan 131,072 tokens, cost", plan_ms(CostPolicy), "ms", 5)
    report(
        "sweep 2,048 lengths x 2 policies x 2 catalogs",
        analysis_s("sweep", {"count": 2048, "spacing": "linear"}),
        "s",
        2,
    )
    if "simulate" in ANALYSES:
        report("simulate 1,000 requests", analysis_s("simulate", {"requests": 1000}), "s", 2)
    else:
        print("simulate: not available")


if __name__ == "__main__":
    main()
