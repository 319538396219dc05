"""Solo prefill planning: run a policy from position 0 to the plan's end, detecting stalls."""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Any

from .catalog import Catalog
from .errors import Stalled
from .events import LaunchRecord
from .execution import ExecutionModel
from .policies import Launch, Policy, PrefillState, cheapest_per_token, make_policy
from .request import Request


@dataclass(frozen=True)
class Plan:
    """A policy's launch sequence for one request, with true costs when an execution model is given."""

    policy: str
    launches: tuple[Launch, ...]
    end: int
    true_ms: tuple[float, ...] | None
    first_token_ms: float | None

    @property
    def padded_tokens(self) -> int:
        return sum(launch.padding for launch in self.launches)

    @property
    def ttft_ms(self) -> float | None:
        if self.true_ms is None or self.first_token_ms is None:
            return None
        return sum(self.true_ms) + self.first_token_ms

    @property
    def graphs(self) -> tuple[int, ...]:
        return tuple(launch.graph for launch in self.launches)

    def to_dict(self) -> dict[str, Any]:
        true = self.true_ms or (None,) * len(self.launches)
        return {
            "policy": self.policy,
            "launches": [launch_record(l, t) for l, t in zip(self.launches, true)],
            "launch_count": len(self.launches),
            "end": self.end,
            "padded_tokens": self.padded_tokens,
            "ttft_ms": self.ttft_ms,
        }


def launch_record(launch: Launch, true_ms: float | None) -> LaunchRecord:
    """One launch as plans, results and events spell it (`scheduler_core.events.LaunchRecord`)."""
    return {
        "graph": launch.graph,
        "start": launch.start,
        "end": launch.end,
        "chooser": launch.chooser,
        "predicted_ms": launch.predicted_ms,
        "true_ms": true_ms,
    }


# What one synchronous plan (`plan`, `POST /api/plan/`, `/explain`) may cost: about 1 s on one
# loaded core (bench/plan_bound.py). A prompt of 1,048,576 tokens on the pull request's catalogs
# is ~11,000 units for both policies; on a catalog whose largest graph is 1 token, ~19 million.
MAX_PLAN_WORK = 200_000


def plan_work(catalog: Catalog, request: Request) -> int:
    """What planning `request` costs a policy, known before it starts, in about microseconds (as
    measured by bench/plan_bound.py): each launch it must make (~8 units, plus one per graph it
    weighs), each row of the cost policy's table (one unit, plus one per graph) and each position
    of its search up to the last atomic span (twice that)."""
    end = request.plan_end
    graphs = len(catalog.capacities)
    # rule repeats the full chunk, cost the cheapest
    longest_step = min(catalog.full_chunk, cheapest_per_token(catalog))
    most_launches = -(-end // longest_step) + len(request.message_boundaries)
    step = gcd(*catalog.capacities)
    rows = min(end, 3 * catalog.full_chunk) // step
    searched = request.atomic_spans[-1][1] // step if request.atomic_spans else 0
    return most_launches * (8 + graphs) + (rows + 2 * searched) * (1 + graphs)


def plan_prefix(policy: Policy, catalog: Catalog, request: Request) -> tuple[tuple[Launch, ...], int | None]:
    """Every launch `policy` makes for `request` until the end or a stall: (launches, stall position or None)."""
    launches: list[Launch] = []
    position, end = 0, request.plan_end
    while position < end:
        launch = policy.choose(PrefillState(catalog, request, position))
        if launch is None or launch.end <= position:
            return tuple(launches), position
        launches.append(launch)
        position = launch.end
    return tuple(launches), None


def plan_launches(policy: Policy, catalog: Catalog, request: Request) -> tuple[Launch, ...]:
    """Every launch `policy` makes for `request`; raises Stalled if it ever offers none."""
    launches, stall = plan_prefix(policy, catalog, request)
    if stall is not None:
        raise Stalled(stall, policy.name)
    return launches


def plan(policy: Policy | str, catalog: Catalog, request: Request, execution: ExecutionModel | None = None) -> Plan:
    """The spec's `plan`: launches, padding, and (with an execution model) true per-launch ms, each
    chunk after the tokens before it, and TTFT."""
    policy = make_policy(policy) if isinstance(policy, str) else policy
    launches = plan_launches(policy, catalog, request)
    true_ms = None if execution is None else tuple(execution.launch_ms(l.graph, 0, l.start) for l in launches)
    first = None if execution is None else execution.first_token_ms
    return Plan(policy.name, launches, request.plan_end, true_ms, first)
