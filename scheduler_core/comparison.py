"""Two policies compared: which two, declared once, and the deltas every comparison reads.

A comparison is `after - before`. A decision compares its own before and after (`from_policy`,
`to_policy`); a job compares the pair its reader picks, by default the first two policies it ran
(`default_pair`). Nothing here knows a policy by name: a policy registered in `policies.POLICIES`
is compared like any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import saturation
from .deltas import PERCENTILE_OF_DIFFERENCES, difference_of_percentiles
from .errors import InvalidInput
from .stats import interval95, percentiles, quantiles, round6

Json = dict[str, Any]
WORST = 20  # requests listed where `after` is slowest against `before`
SAME_MS = 1e-6  # closer than this, a request is neither slower nor faster


@dataclass(frozen=True)
class Pair:
    """`after - before`: what a delta subtracts."""

    before: str
    after: str

    @property
    def label(self) -> str:
        return f"{self.after} − {self.before}"

    def to_dict(self) -> dict[str, str]:
        return {"before": self.before, "after": self.after, "label": self.label}


def policies_run(result: object) -> list[str]:
    """The policies a result compares, in run order: its `policies`, a serving result's rows naming
    their `policy` (simulate, replay, capacity) or a sweep's names; empty for any other result."""
    ran = result.get("policies") if isinstance(result, dict) else None
    names = [p.get("policy") if isinstance(p, dict) else p for p in ran] if isinstance(ran, list) else []
    return [name for name in names if isinstance(name, str)]


def default_pair(ran: Sequence[str]) -> Pair | None:
    """The first two policies a job ran, in its order; None when it ran fewer than two."""
    names = list(dict.fromkeys(ran))
    return Pair(names[0], names[1]) if len(names) >= 2 else None


def ordered_pairs(ran: Sequence[str]) -> list[Pair]:
    """Every pair a job can be asked to compare, in run order: what a result stores per pair."""
    names = list(dict.fromkeys(ran))
    return [Pair(b, a) for b in names for a in names if a != b]


def picked_pair(ran: Sequence[str], before: str | None, after: str | None) -> Pair | None:
    """The pair a reader picks among the policies a job ran (`before`, `after`), by default its
    first two (`default_pair`); InvalidInput naming the field for a policy it did not run, or the
    same policy on both sides."""
    if not before and not after:
        return default_pair(ran)
    names = list(dict.fromkeys(ran))
    for field, name in (("before", before), ("after", after)):
        if name not in names:
            raise InvalidInput(field, f"{name or '(none)'!r} is not a policy that ran (it ran {', '.join(names)})")
    if before == after:
        raise InvalidInput("after", f"compare two different policies, not {before} with itself")
    return Pair(str(before), str(after))


def deltas_of(compared: Sequence[Json], pair: Pair) -> Json | None:
    """The comparison of `pair` among those already made, one per ordered pair (`ordered_pairs`:
    a capacity rate's `comparisons`, a stored reading's `every_request_deltas`), else None."""
    return next((c for c in compared if (c["before"], c["after"]) == (pair.before, pair.after)), None)


def pair_in(ran: Sequence[str], pair: Pair | None) -> Pair | None:
    """`pair` when the job ran both of its policies, else None (the job cannot compare them)."""
    return pair if pair is not None and pair.before in ran and pair.after in ran else None


def percentile_delta(by_policy: Mapping[str, Mapping[str, Any]], pair: Pair) -> dict[str, float] | None:
    """The difference of percentiles: after's TTFT p50 (p99) minus before's, from each policy's own
    distribution. None unless both ran to the end."""
    before, after = by_policy.get(pair.before), by_policy.get(pair.after)
    if not before or not after or before.get("stalled") or after.get("stalled"):
        return None
    return {q: round6(after["ttft_ms"][q] - before["ttft_ms"][q]) for q in ("p50", "p99")}


def paired_intervals(draws: Mapping[str, Mapping[str, Sequence[float]]], pair: Pair, keys: Sequence[str]) -> Json:
    """Per figure, the 95 % interval of `after - before` over seeded draws paired by seed."""
    before, after = draws[pair.before], draws[pair.after]
    return {k: interval95([a - b for a, b in zip(after[k], before[k], strict=True)]) for k in keys}


def request_deltas(policies: Sequence[Json], pair: Pair | None, worst: int = WORST) -> Json | None:
    """The same requests under both policies: `after - before` TTFT per request as a CDF (101
    points), its percentiles (`definition`: the percentile of per-request differences), the shares
    where `after` is slower or faster, and the `worst` requests (after's largest losses) with their
    prompts; beside them the difference of the two policies' percentiles, and `queueing` when
    either run was overloaded (then both measure queues, not the policies). None unless the pair
    ran and both policies ran to the end."""
    by_name = {p["policy"]: p for p in policies}
    pair = pair_in(list(by_name), pair)
    if pair is None or by_name[pair.before]["stalled"] or by_name[pair.after]["stalled"]:
        return None
    before = {r["id"]: r for r in by_name[pair.before]["per_request"]}
    rows = []
    for r in by_name[pair.after]["per_request"]:
        b = before[r["id"]]
        rows.append((round6(r["ttft_ms"] - b["ttft_ms"]), r, b))
    deltas = sorted(d for d, _, _ in rows)
    n = len(deltas)
    rows.sort(key=lambda row: (-row[0], row[1]["id"]))
    loads = [saturation.Load(**p["load"]) for p in (by_name[pair.before], by_name[pair.after]) if p.get("load")]
    return {
        **pair.to_dict(),
        "of": f"{pair.label} TTFT per request (ms)",
        "definition": PERCENTILE_OF_DIFFERENCES,
        "difference_of_percentiles": difference_of_percentiles(
            [r["ttft_ms"] for _, r, _ in rows], [b["ttft_ms"] for _, _, b in rows]
        ),
        "queueing": any(load.overloaded for load in loads),
        "requests": n,
        "mean_ms": round6(sum(deltas) / n) if n else None,
        **percentiles(deltas, ordered=True),
        "min": deltas[0] if n else None,
        "share_after_slower": round6(sum(1 for d in deltas if d > SAME_MS) / n) if n else None,
        "share_after_faster": round6(sum(1 for d in deltas if d < -SAME_MS) / n) if n else None,
        "cdf_ms": quantiles(deltas, ordered=True),
        "worst": [
            {
                "id": r["id"],
                "prompt_tokens": r["prompt_tokens"],
                "output_tokens": r["output_tokens"],
                "arrival_ms": r["arrival_ms"],
                "before_ttft_ms": b["ttft_ms"],
                "after_ttft_ms": r["ttft_ms"],
                "delta_ms": d,
            }
            for d, r, b in rows[:worst]
        ],
    }


def every_request_deltas(policies: Sequence[Json]) -> list[Json]:
    """`request_deltas` for every ordered pair of the policies a run holds (those it can compare):
    made once when a result is stored, so a reader need not read its per-request rows again."""
    pairs = ordered_pairs([p["policy"] for p in policies])
    return [deltas for pair in pairs if (deltas := request_deltas(policies, pair)) is not None]
