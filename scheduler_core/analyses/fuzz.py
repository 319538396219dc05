"""Liveness, fuzzed: random valid catalogs and requests through `planner.plan` for each policy.
A stall or a broken progress invariant is shrunk to a minimal counterexample that is itself a
valid `plan` input, so it can be replayed with `python -m scheduler_core plan`."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from ..catalog import Catalog
from ..errors import InvalidInput, Stalled
from ..planner import launch_record, plan, plan_prefix
from ..policies import Launch, make_policy
from ..request import Request
from .contract import Analysis, Emit
from .pacing import Ticker
from .params import IntParam, PolicyListParam

# Mostly multiples of 8 keep the cost tables small; an odd capacity now and then exercises gcd 1.
CAPACITY_POOL: tuple[int, ...] = (8, 16, 24, 32, 48, 64, 96, 128, 256, 384, 512)
MAX_SHRINK_ATTEMPTS = 5_000

Json = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One fuzz input in its JSON form (what `plan` reads), so shrinking edits plain data."""

    catalog: tuple[Json, ...]
    request: Json

    def parse(self) -> tuple[Catalog, Request] | None:
        """The validated objects, or None if an edit made the input invalid per the spec."""
        try:
            catalog = Catalog.from_dicts(list(self.catalog))
            return catalog, Request.parse(self.request, catalog)
        except InvalidInput:
            return None


def random_case(rng: random.Random, max_tokens: int) -> Case:
    """A valid catalog and request; spans never exceed the full chunk nor hold a boundary."""
    capacities = rng.sample(CAPACITY_POOL, rng.randint(1, 6))
    if rng.random() < 0.2:
        capacities.append(rng.randint(1, 600))
    graphs: list[dict[str, Any]] = [
        {"prefill": c, "decode": 0, "ms": _random_ms(rng, c)} for c in sorted(set(capacities))
    ]
    if rng.random() < 0.2:
        graphs.append({"prefill": 0, "decode": rng.choice((1, 8)), "ms": 1.0})  # plan must ignore it
    full = max(g["prefill"] for g in graphs)
    n = rng.randint(1, max_tokens)
    spans: list[list[int]] = []
    position = 0
    for _ in range(rng.randint(0, 4)):
        start = position + rng.randint(0, max(0, n // 3))
        if start >= n:
            break
        end = min(n, start + rng.randint(1, full))
        spans.append([start, end])
        position = end
    inside = {x for s, e in spans for x in range(s + 1, e)}
    boundaries = sorted(
        {b for b in (rng.randint(1, n - 1) for _ in range(rng.randint(0, 3)) if n > 1) if b not in inside}
    )
    limit = rng.randint(0, n) if rng.random() < 0.3 else None
    return Case(
        tuple(graphs),
        {"prompt_tokens": n, "message_boundaries": boundaries, "atomic_spans": spans, "prefill_limit": limit},
    )


def _random_ms(rng: random.Random, capacity: int) -> float | None:
    """Unmeasured (null or 0) a quarter of the time; else affine-ish, arbitrary, or small integers (ties)."""
    roll = rng.random()
    if roll < 0.25:
        return rng.choice((None, 0))
    if roll < 0.5:
        return (2.0 + capacity / 64) * rng.uniform(0.7, 1.6)
    if roll < 0.75:
        return rng.uniform(0.01, 50.0)
    return float(rng.randint(1, 4))


def failure(policy: str, case: Case) -> Json | None:
    """Why `policy` fails `case` (a stall or a broken invariant), or None when its plan is sound."""
    parsed = case.parse()
    assert parsed is not None, "fuzz cases are valid by construction"
    catalog, request = parsed
    try:
        launches = plan(make_policy(policy), catalog, request).launches
    except Stalled as exc:
        return {"kind": "stalled", "position": exc.position}
    broken = broken_invariant(catalog, request, launches)
    return None if broken is None else {"kind": "invariant", "message": broken}


def broken_invariant(catalog: Catalog, request: Request, launches: Sequence[Launch]) -> str | None:
    """The first way the launches fail to make progress to the plan's end, or None."""
    position = 0
    for i, launch in enumerate(launches):
        broken = _broken_launch(catalog, request, launch, position)
        if broken:
            return f"launch {i} {broken}"
        position = launch.end
    if position != request.plan_end:
        return f"plan ends at {position}, not at the request's end {request.plan_end}"
    return None


def _broken_launch(catalog: Catalog, request: Request, launch: Launch, position: int) -> str | None:
    graph, start, end = launch.graph, launch.start, launch.end
    if start != position:
        return f"starts at {start}, previous launch ended at {position}"
    if end <= start:
        return f"does no work ({start} -> {end})"
    if graph not in catalog.prefill_ms or end - start > graph:
        return f"graph {graph} cannot carry {end - start} tokens"
    if end > request.plan_end:
        return f"ends at {end}, past the plan's end {request.plan_end}"
    if request.cut(end) != end:
        return f"ends at {end}, inside an atomic span"
    if any(start < b < end for b in request.message_boundaries):
        return f"crosses a message boundary ({start} -> {end})"
    return None


def shrink(case: Case, still_fails: Callable[[Case], bool]) -> tuple[Case, int]:
    """Greedy shrinking: take the first simpler valid case that still fails, until none does."""
    steps = attempts = 0
    improved = True
    while improved and attempts < MAX_SHRINK_ATTEMPTS:
        improved = False
        for candidate in simpler(case):
            attempts += 1
            if candidate.parse() is not None and still_fails(candidate):
                case, steps, improved = candidate, steps + 1, True
                break
    return case, steps


def simpler(case: Case) -> Iterator[Case]:
    """Strictly smaller variants, boldest first: fewer graphs, fields, spans, boundaries, tokens; plainer ms."""
    graphs, r = case.catalog, case.request
    for i in range(len(graphs)):
        yield Case(graphs[:i] + graphs[i + 1 :], r)
    if r["prefill_limit"] is not None:
        yield Case(graphs, {**r, "prefill_limit": None})
    for key in ("message_boundaries", "atomic_spans"):
        for i in range(len(r[key])):
            yield Case(graphs, {**r, key: r[key][:i] + r[key][i + 1 :]})
    for cut in _halvings(r["prompt_tokens"] - 1):
        yield Case(graphs, _truncated(r, r["prompt_tokens"] - cut))
        yield Case(graphs, _shifted(r, cut))
    for i, (start, end) in enumerate(r["atomic_spans"]):
        for d in _halvings(end - start - 1):
            for span in ([start + d, end], [start, end - d]):
                yield Case(graphs, {**r, "atomic_spans": r["atomic_spans"][:i] + [span] + r["atomic_spans"][i + 1 :]})
    for i, g in enumerate(graphs):
        if g["ms"] not in (None, 0, 1.0):
            yield Case(graphs[:i] + ({**g, "ms": 1.0},) + graphs[i + 1 :], r)


def _halvings(n: int) -> list[int]:
    """n, n/2, n/4, ... 1: bold steps first, then fine ones."""
    out = []
    while n > 0:
        out.append(n)
        n //= 2
    return out


def _truncated(r: Json, n: int) -> Json:
    """The first n tokens of the request."""
    limit = r["prefill_limit"]
    return {
        "prompt_tokens": n,
        "message_boundaries": [b for b in r["message_boundaries"] if b < n],
        "atomic_spans": [s for s in r["atomic_spans"] if s[1] <= n],
        "prefill_limit": None if limit is None else min(limit, n),
    }


def _shifted(r: Json, k: int) -> Json:
    """The request without its first k tokens."""
    limit = r["prefill_limit"]
    return {
        "prompt_tokens": r["prompt_tokens"] - k,
        "message_boundaries": [b - k for b in r["message_boundaries"] if b > k],
        "atomic_spans": [[s - k, e - k] for s, e in r["atomic_spans"] if s >= k],
        "prefill_limit": None if limit is None else max(0, limit - k),
    }


def work(params: dict[str, Any]) -> int:
    """Plans to make; each costs about a millisecond at the largest prompt sizes allowed."""
    return int(params["cases"] * len(params["policies"]) * max(1, params["prompt_max"] // 2048))


class PolicyReport(TypedDict):
    plans: int
    stalls: int
    violations: int
    first_failing_case: int | None
    counterexample: dict[str, Any] | None  # the shrunk case as a replayable `plan` input


class FuzzResult(TypedDict):
    seed: int
    cases: int
    prompt_max: int
    policies: dict[str, PolicyReport]


def run(params: dict[str, Any], emit: Emit) -> FuzzResult:
    rng = random.Random(params["seed"])
    policies = params["policies"]
    report: dict[str, PolicyReport] = {
        name: {"plans": 0, "stalls": 0, "violations": 0, "first_failing_case": None, "counterexample": None}
        for name in policies
    }
    ticker = Ticker(emit, params["cases"])
    for index in range(params["cases"]):
        case = random_case(rng, params["prompt_max"])
        for name in policies:
            entry = report[name]
            entry["plans"] += 1
            found = failure(name, case)
            if found is None:
                continue
            entry["stalls" if found["kind"] == "stalled" else "violations"] += 1
            if entry["counterexample"] is None:
                entry["first_failing_case"] = index
                entry["counterexample"] = _minimal(name, case, found["kind"])
        ticker.tick(index + 1, f"case {index + 1}")
    return {"seed": params["seed"], "cases": params["cases"], "prompt_max": params["prompt_max"], "policies": report}


def _minimal(policy: str, case: Case, kind: str) -> Json:
    """The shrunk counterexample as a replayable `plan` input, with what it shows."""

    def still_fails(c: Case) -> bool:
        found = failure(policy, c)
        return found is not None and found["kind"] == kind

    small, steps = shrink(case, still_fails)
    parsed = small.parse()
    assert parsed is not None, "shrink only accepts valid cases"
    catalog, request = parsed
    launches, _ = plan_prefix(make_policy(policy), catalog, request)
    return {
        "failure": failure(policy, small),
        "launches": [launch_record(l, None) for l in launches],  # up to the stall, or every one
        "shrink_steps": steps,
        "input": {"policy": policy, "catalog": catalog.to_dicts(), "request": request.to_dict()},
        "original": {"catalog": list(case.catalog), "request": case.request},
    }


def format_text(result: FuzzResult) -> str:
    """A line per policy, then each minimal counterexample as a `plan` input."""
    lines = [f"{result['cases']} random cases, seed {result['seed']}"]
    for name, entry in result["policies"].items():
        lines.append(
            f"{name:<8} {entry['plans']} plans, {entry['stalls']} stalls, {entry['violations']} invariant violations"
        )
        if entry["counterexample"]:
            failure = entry["counterexample"]["failure"]
            what = (
                f"stalled at position {failure['position']}"
                if failure["kind"] == "stalled"
                else f"broke an invariant: {failure['message']}"
            )
            lines.append(f"  minimal counterexample (case {entry['first_failing_case']}): {what}")
            lines.append(f"  {json.dumps(entry['counterexample']['input'])}")
    return "\n".join(lines)


ANALYSIS = Analysis(
    name="fuzz",
    summary="Random valid catalogs and requests through plan; stalls and broken invariants shrunk to minimal counterexamples.",
    params=(
        IntParam("cases", 2000, "random catalog/request pairs", minimum=1, maximum=1_000_000),
        IntParam("seed", 0, "random seed (the same seed replays the same cases)", minimum=0, maximum=2**31 - 1),
        IntParam("prompt_max", 2048, "longest random prompt (tokens)", minimum=1, maximum=1 << 17),
        PolicyListParam("policies", help="policies to fuzz", every_policy=True, all_by_default=True),
    ),
    run=run,
    work=work,
    max_work=1_000_000,
    format_text=format_text,
    result=FuzzResult,
    aliases={"max_tokens": "prompt_max"},  # renamed on 2026-11-30
    example={"cases": 60, "seed": 1, "prompt_max": 512},
)
