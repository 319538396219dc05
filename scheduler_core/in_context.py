"""One request of a serving run, explained in its context: why its TTFT in the run is what it is.

`/explain` plans a prompt alone: the chunks a policy picks and what they cost. In a serving run the
same request's TTFT also holds its own fixed launches (the per-request init graph, the first token's
step) and, above all, the time it waited behind other requests and shared steps with them. So its
TTFT in the run splits, exactly, into three parts:

- `plan_ms`: the plan's own TTFT, as `/explain` shows it;
- `own_launches_ms`: what running the request alone through the same step loop, on the same setting,
  adds to its plan (alone - plan);
- `waited_ms`: the rest (in the run - alone): queueing behind other work and sharing launches with it.

For the pair a table compares (after - before), the same three parts of the delta add up to the
table's delta.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .catalog import Catalog
from .execution import ExecutionModel
from .request import Request
from .scheduler import Arrival, SchedulerConfig, schedule
from .stats import round6

PARTS = ("plan_ms", "own_launches_ms", "waited_ms")


@dataclass(frozen=True)
class Split:
    """A request's TTFT in the run under one policy, and its three parts (which sum to it)."""

    policy: str
    in_run_ms: float
    plan_ms: float
    own_launches_ms: float
    waited_ms: float

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def alone_ttft_ms(
    request: Request, output_tokens: int, policy: str, catalog: Catalog, execution: ExecutionModel, max_lanes: int
) -> float:
    """The request's TTFT with nothing else in the engine: the same loop, the same setting."""
    arrival = Arrival(0, 0.0, request, output_tokens)
    result = schedule([arrival], catalog, execution, SchedulerConfig(policy, max_lanes))
    return result.lanes[0].ttft_ms


def split(policy: str, in_run_ms: float, alone_ms: float, plan_ms: float) -> Split:
    return Split(policy, round6(in_run_ms), round6(plan_ms), round6(alone_ms - plan_ms), round6(in_run_ms - alone_ms))


def delta(after: Split, before: Split) -> dict[str, object]:
    """after - before of the run's TTFT (the table's figure) and of each part; the parts sum to it."""
    return {
        "after": after.policy,
        "before": before.policy,
        "in_run_ms": round6(after.in_run_ms - before.in_run_ms),
        **{part: round6(getattr(after, part) - getattr(before, part)) for part in PARTS},
    }


def splits(in_run: Mapping[str, float], plans: Mapping[str, float], alone: Mapping[str, float]) -> dict[str, Split]:
    """Each policy present in all three: its split."""
    return {p: split(p, in_run[p], alone[p], plans[p]) for p in in_run if p in plans and p in alone}


@dataclass(frozen=True)
class InRun:
    """A request as a serving result holds it: its prompt and output, its TTFT per policy."""

    id: int
    prompt_tokens: int
    output_tokens: int
    ttft_ms: dict[str, float]


def in_run(result: Mapping[str, Any], request_id: int, rate_per_s: float | None = None) -> InRun | None:
    """The request from a simulate or replay result (every request, every policy), or from a
    capacity result's per-request table at `rate_per_s` (its worst requests: those a table links
    from). None when the result does not hold it."""
    rows = {
        p["policy"]: r
        for p in result.get("policies") or ()
        for r in p.get("per_request") or ()
        if r["id"] == request_id
    }
    if rows:
        first = next(iter(rows.values()))
        ttft = {name: r["ttft_ms"] for name, r in rows.items()}
        return InRun(request_id, first["prompt_tokens"], first["output_tokens"], ttft)
    for row in result.get("deltas") or ():
        if not isinstance(row, Mapping) or row.get("rate_per_s") != rate_per_s:
            continue
        for c in row.get("comparisons") or ():  # one per ordered pair: a request is in either order's
            for w in (c.get("per_request") or {}).get("worst", ()):
                if w["id"] == request_id:
                    ttft = {c["before"]: w["before_ttft_ms"], c["after"]: w["after_ttft_ms"]}
                    return InRun(request_id, w["prompt_tokens"], w["output_tokens"], ttft)
    return None
