"""Was a serving run overloaded? Judged from the run's own requests, so every serving analysis
(simulate, capacity's rates, replay, the simulated engine) says it the same way.

A run is overloaded when its queue was still growing at the end of the traffic: over the second
half of the traffic's span, more requests arrived than got their first token, by more than
`TOLERANCE` of that half's arrivals and at least `MIN_GROWTH`. Then every later request waits longer
than the one before, and a TTFT percentile measures how long the traffic lasted, not what a policy
does: a comparison of policies there compares queues.

Too few requests (`MIN_REQUESTS`) or no span between the first and last arrival: not judged, and
the verdict says so (`judged: False`, never overloaded).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .stats import round6

TOLERANCE = 0.10  # share of the last half's arrivals the queue may gain before it is growth
MIN_GROWTH = 10  # requests: a smaller gain is a burst's tail, not a trend
MIN_REQUESTS = 20
QUEUEING = "TTFT here is mostly queueing, not the policy's own effect"


@dataclass(frozen=True)
class Load:
    """The verdict and its figures: rates over the traffic's second half, and the queue it left."""

    judged: bool
    overloaded: bool
    offered_per_s: float | None  # arrivals per second over the second half of the traffic
    sustained_per_s: float | None  # first tokens per second over the same half
    backlog_at_end: int  # requests arrived by the last arrival with no first token yet
    backlog_growth: int  # ... minus those waiting at the half

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def describe(self) -> str:
        """One line for a table or a page: 'overloaded: offered 5.53/s, sustained 2.01/s, ...'."""
        if not self.judged:
            return "load not judged (too few requests or no span between arrivals)"
        rates = f"offered {self.offered_per_s:g}/s, sustained {self.sustained_per_s:g}/s"
        if self.overloaded:
            return f"OVERLOADED: {rates}; {self.backlog_at_end} requests still queued at the last arrival"
        return f"not overloaded: {rates}"


def judge(arrivals_ms: Sequence[float], first_tokens_ms: Iterable[float]) -> Load:
    """The verdict for a run: every offered request's arrival, and the first-token times of those
    that got one (a request that never did, in a stalled run, counts as still waiting)."""
    arrived = sorted(arrivals_ms)
    if len(arrived) < MIN_REQUESTS or arrived[-1] <= arrived[0]:
        return Load(False, False, None, None, 0, 0)
    firsts = sorted(first_tokens_ms)
    start, end = arrived[0], arrived[-1]
    half = (start + end) / 2

    def waiting(t: float) -> int:
        return bisect_right(arrived, t) - bisect_right(firsts, t)

    came = bisect_right(arrived, end) - bisect_right(arrived, half)
    served = bisect_right(firsts, end) - bisect_right(firsts, half)
    growth = waiting(end) - waiting(half)
    seconds = (end - half) / 1000.0
    overloaded = growth > max(TOLERANCE * came, MIN_GROWTH)
    return Load(True, overloaded, round6(came / seconds), round6(served / seconds), waiting(end), growth)


def overloaded_runs(result: Mapping[str, Any], policies: Collection[str] | None = None) -> list[str]:
    """What a serving result says was overloaded, a line per policy (of `policies` only, when
    given: the pair a comparison reads): a simulate or replay policy's run (its `load`), or the rates
    at which a capacity policy was (its points' `overloaded`). Empty for any other result."""
    lines = []
    load = result.get("load")  # a simulated engine's, over its latest requests
    if isinstance(load, Mapping) and load.get("overloaded"):
        lines.append(f"the engine: {Load(**load).describe()}")
    for p in result.get("policies") or ():
        if not isinstance(p, Mapping) or (policies is not None and p.get("policy") not in policies):
            continue
        load = p.get("load")
        if load and load.get("overloaded"):
            lines.append(f"{p['policy']}: {Load(**load).describe()}")
        points = [*p.get("points", ()), *p.get("search", ())]
        over = sorted((pt for pt in points if pt.get("overloaded")), key=lambda pt: pt["rate_per_s"])
        if over:
            rates = f"{over[0]['rate_per_s']:g}/s" + (f" to {over[-1]['rate_per_s']:g}/s" if len(over) > 1 else "")
            sustained = sorted(pt["sustained_per_s"] for pt in over)
            lines.append(
                f"{p['policy']}: OVERLOADED at {len(over)} of {len(points)} rates ({rates}), "
                f"sustaining {sustained[0]:g}" + (f" to {sustained[-1]:g}/s" if len(over) > 1 else "/s")
            )
    return lines
