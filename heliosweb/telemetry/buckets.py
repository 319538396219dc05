"""Fixed latency buckets: a histogram that merges by adding counts, so minute rollups sum into
hours, engines into recipes, and web processes agree without sharing memory.

Edges run 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k ms from 0.1 ms to 80 s (60 edges, a step of
at most 25 %): quantiles read from them are within one step of the truth. Prometheus gets the
1-2.5-5 subset (18 edges), which the fine buckets sum into exactly.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

_MANTISSAS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
_COARSE = (1.0, 2.5, 5.0)
_GRID = [(m, round(m * 10.0**k, 6)) for k in range(-1, 5) for m in _MANTISSAS]
EDGES_MS: tuple[float, ...] = tuple(edge for _, edge in _GRID)
BUCKETS = len(EDGES_MS) + 1  # the last one counts values above every edge (+Inf)
PROMETHEUS_EDGE_INDEXES: tuple[int, ...] = tuple(i for i, (m, _) in enumerate(_GRID) if m in _COARSE)


def bucket_of(value_ms: float) -> int:
    """The index of the first bucket whose upper edge is >= value (Prometheus's `le`)."""
    return bisect_left(EDGES_MS, value_ms)


def empty() -> list[int]:
    return [0] * BUCKETS


def add(into: list[int], other: Sequence[int]) -> None:
    for i, n in enumerate(other):
        into[i] += n


def cumulative_seconds(counts: Sequence[int]) -> list[tuple[str, int]]:
    """Prometheus histogram buckets: (`le` in seconds, cumulative count) on the coarse edges, then +Inf."""
    running, out, taken = 0, [], 0
    for i in PROMETHEUS_EDGE_INDEXES:
        running += sum(counts[taken : i + 1])
        taken = i + 1
        out.append((repr(EDGES_MS[i] / 1000.0), running))
    out.append(("+Inf", sum(counts)))
    return out


def quantile_ms(counts: Sequence[int], q: float) -> float | None:
    """The q-quantile, interpolated inside its bucket; None for an empty histogram. Values above
    the last edge read as the last edge (a lower bound)."""
    total = sum(counts)
    if total == 0:
        return None
    rank, running = q * total, 0
    for i, n in enumerate(counts):
        if n and running + n >= rank:
            if i == len(EDGES_MS):
                return EDGES_MS[-1]
            low = EDGES_MS[i - 1] if i else 0.0
            return low + (EDGES_MS[i] - low) * max(0.0, rank - running) / n
        running += n
    return EDGES_MS[-1]
