"""CostPolicy against a brute-force reference written straight from the spec: enumerate every
plan from the position to the target, re-filtering at each launch, and take the best by the
spec's comparison. Small inputs only; exponential on purpose."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core.catalog import Catalog
from scheduler_core.planner import plan
from scheduler_core.policies import CostPolicy, PrefillState, RulePolicy
from scheduler_core.request import Request

# Dyadic values sum exactly, so ties are real ties; 0.1, 0.3 and 1/3 add up with rounding error
# and exercise the 1e-9 tolerance; None and 0 are unmeasured.
MS = (None, 0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 0.1, 0.3, 1 / 3)


def segment_end(request: Request, p: int) -> int:
    limit = request.prompt_tokens if request.prefill_limit is None else request.prefill_limit
    return min([b for b in request.message_boundaries if b > p] + [limit, request.prompt_tokens])


def cut(request: Request, x: int) -> int:
    return next((s for s, e in request.atomic_spans if s < x < e), x)


def candidates(catalog: Catalog, request: Request, p: int) -> list[tuple[int, int]]:
    """(capacity, work) surviving the spec's filter at p."""
    e = segment_end(request, p)
    work = {c: cut(request, min(p + c, e)) - p for c in catalog.capacities}
    return [
        (c, w)
        for c, w in work.items()
        if w > 0 and not (catalog.prefill_ms[c] is None and any(d < c and work[d] == w for d in work))
    ]


def all_plans(catalog: Catalog, request: Request, p: int, target: int) -> list[list[int]]:
    if p == target:
        return [[]]
    return [
        [c] + rest for c, w in candidates(catalog, request, p) for rest in all_plans(catalog, request, p + w, target)
    ]


def better(a: list[int], b: list[int], catalog: Catalog) -> bool:
    """Is plan a strictly preferred to plan b under the spec's order?"""
    ta, tb = (sum(catalog.predicted_ms(c) for c in x) for x in (a, b))
    if abs(ta - tb) > 1e-9 * max(1.0, abs(ta), abs(tb)):
        return ta < tb
    return (sum(a), len(a), -a[0]) < (sum(b), len(b), -b[0])


def reference_first(catalog: Catalog, request: Request, p: int) -> int | None:
    best: list[int] | None = None
    for candidate in all_plans(catalog, request, p, cut(request, segment_end(request, p))):
        if best is None or better(candidate, best, catalog):
            best = candidate
    return None if best is None else best[0]


@st.composite
def small_cases(draw: st.DrawFn) -> tuple[Catalog, Request]:
    capacities = draw(st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True))
    catalog = Catalog.from_dicts([{"prefill": c, "decode": 0, "ms": draw(st.sampled_from(MS))} for c in capacities])
    n = draw(st.integers(1, 16 if min(capacities) > 1 else 12))
    spans, position = [], 0
    for _ in range(draw(st.integers(0, 3))):
        start = position + draw(st.integers(0, 4))
        end = start + draw(st.integers(1, catalog.full_chunk))
        if end > n:
            break
        spans.append([start, end])
        position = end
    inside = {x for s, e in spans for x in range(s + 1, e)}
    boundaries = sorted(
        {b for b in draw(st.lists(st.integers(1, max(1, n - 1)), max_size=3)) if b < n and b not in inside}
    )
    limit = draw(st.none() | st.integers(0, n))
    request = Request.parse(
        {"prompt_tokens": n, "message_boundaries": boundaries, "atomic_spans": spans, "prefill_limit": limit}, catalog
    )
    return catalog, request


def positions(request: Request) -> list[int]:
    """Every position a planner could stand on: 0 and each token not strictly inside a span."""
    return [p for p in range(request.plan_end) if cut(request, p) == p]


@settings(max_examples=400, deadline=None)
@given(small_cases())
def test_cost_picks_the_first_launch_of_the_brute_force_best_plan(case):
    catalog, request = case
    policy = CostPolicy()
    for p in positions(request):
        launch = policy.choose(PrefillState(catalog, request, p))
        expected = reference_first(catalog, request, p)
        assert (launch and launch.graph) == expected, f"position {p}"


@settings(max_examples=200, deadline=None)
@given(small_cases())
def test_rule_launches_its_graph_when_it_survives_and_else_the_brute_force_choice(case):
    catalog, request = case
    for launch in plan(RulePolicy(), catalog, request).launches:
        p = launch.start
        remaining = segment_end(request, p) - p
        covering = [c for c in catalog.capacities if c >= remaining]
        graph = catalog.full_chunk if remaining >= catalog.full_chunk else min(covering)
        survives = catalog.prefill_ms[graph] is not None and cut(request, min(p + graph, segment_end(request, p))) > p
        assert (launch.graph, launch.chooser) == (
            (graph, "rule") if survives else (reference_first(catalog, request, p), "cost")
        )


def test_the_reference_agrees_with_the_spec_example():
    catalog = Catalog.from_dicts(
        [
            {"prefill": 64, "decode": 0, "ms": 3.0},
            {"prefill": 2048, "decode": 0, "ms": 1.0},
            {"prefill": 4096, "decode": 0, "ms": None},
        ]
    )
    request = Request(6000, atomic_spans=((2000, 5000),))
    assert reference_first(catalog, request, 0) == 2048
