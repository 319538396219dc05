"""The synchronous plan's work bound (`scheduler_core.planner.MAX_PLAN_WORK`), measured: the
largest plans it still accepts, for catalogs that stress each term of `plan_work`, timed with
their peak memory; and the inputs of issue 18 (row 1) that it refuses, with how long refusing
takes. Target: every accepted plan (both policies, as `/explain` plans it) <= 1 s, refusals
<= 10 ms. Figures, not asserts; say whether the machine was loaded when you quote them.

Run: .venv/bin/python bench/plan_bound.py
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler_core.catalog import Catalog
from scheduler_core.errors import InvalidInput
from scheduler_core.plan_io import answer
from scheduler_core.planner import MAX_PLAN_WORK, plan_work
from scheduler_core.request import Request

POLICIES = ["cost", "rule"]
PR22 = [{"prefill": c, "decode": 0, "ms": 2 + c / 64} for c in (64, 128, 256, 512, 1024, 2048, 4096)]
ONE_TOKEN = [{"prefill": 1, "decode": 0, "ms": 0.01}]
COPRIME = [{"prefill": 63, "decode": 0, "ms": 1.0}, {"prefill": 64, "decode": 0, "ms": 1.01}]
HUGE_AND_ONE = [{"prefill": 1, "decode": 0, "ms": 0.01}, {"prefill": 1 << 20, "decode": 0, "ms": 5.0}]


Make = Callable[[int], dict[str, Any]]


def prompt(n: int) -> dict[str, Any]:
    return {"prompt_tokens": n}


def span_at_end(n: int) -> dict[str, Any]:
    return {"prompt_tokens": n, "atomic_spans": [[max(0, n - 10), n]]}


def largest_accepted(catalog: list[dict[str, Any]], make: Make) -> dict[str, Any]:
    """The longest prompt (binary search) whose plan, for both policies, is within the bound."""
    parsed = Catalog.from_dicts(catalog)
    lo, hi = 1, 1 << 20
    while lo < hi:
        mid = (lo + hi + 1) // 2
        work = plan_work(parsed, Request.parse(make(mid), parsed)) * len(POLICIES)
        lo, hi = (mid, hi) if work <= MAX_PLAN_WORK else (lo, mid - 1)
    return make(lo)


def run(catalog: list[dict[str, Any]], request: dict[str, Any]) -> str:
    try:
        plans = answer({"policies": POLICIES, "catalog": catalog, "request": request})["plans"]
    except InvalidInput as exc:
        return f"refused ({exc.field})"
    return "launches " + "/".join(str(p.get("launch_count")) for p in plans)


def timed(catalog: list[dict[str, Any]], request: dict[str, Any]) -> tuple[str, float, float]:
    """(outcome, seconds, peak MB): timed alone, then run again under tracemalloc (which slows it)."""
    began = time.perf_counter()
    outcome = run(catalog, request)
    seconds = time.perf_counter() - began
    tracemalloc.start()
    run(catalog, request)
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return outcome, seconds, peak


def show(name: str, request: dict[str, Any], figures: tuple[str, float, float]) -> None:
    outcome, seconds, peak = figures
    print(f"{name:44} {request['prompt_tokens']:>9,} tokens  {outcome:34} {seconds:6.3f} s {peak:6.1f} MB")


def main() -> None:
    print(f"MAX_PLAN_WORK = {MAX_PLAN_WORK:,} (both policies together); target: accepted <= 1 s, refused <= 10 ms")
    accepted: list[tuple[str, list[dict[str, Any]], Make]] = [
        ("pr22 catalogs, longest accepted", PR22, prompt),
        ("pr22 catalogs, an atomic span at the end", PR22, span_at_end),
        ("one 1-token graph, longest accepted", ONE_TOKEN, prompt),
        ("graphs 63 and 64, longest accepted", COPRIME, prompt),
        ("graphs 63 and 64, an atomic span at the end", COPRIME, span_at_end),
        ("graphs 1 and 1,048,576, longest accepted", HUGE_AND_ONE, prompt),
    ]
    for name, catalog, make in accepted:
        request = largest_accepted(catalog, make)
        show(name, request, timed(catalog, request))
    refused = [
        ("row 1: prompt_tokens 2^62", PR22, {"prompt_tokens": 1 << 62}),
        ("row 1: 1,048,576 tokens on a 1-token graph", ONE_TOKEN, prompt(1 << 20)),
        ("graphs 1 and 1,048,576: 1,048,576 tokens", HUGE_AND_ONE, prompt(1 << 20)),
        ("pr22 catalogs: 1,048,576 tokens, a span at the end", PR22, span_at_end(1 << 20)),
    ]
    for name, catalog, request in refused:
        show(name, request, timed(catalog, request))


if __name__ == "__main__":
    main()
