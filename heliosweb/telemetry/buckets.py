"""Fixed latency buckets: histograms that merge by adding counts (minutes into hours, engines into
recipes, web processes without shared memory). Edges run 1, 1.1, 1.2, ... 9.4 x 10^k ms (each at
most 10 % above the one before) from 0.1 ms to 94 s: a quantile read from them, here or by
Prometheus (which gets every edge), is within 10 % of the truth.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

# Each mantissa is at most 1.1 times the one before it (and 10 at most 1.1 times 9.4).
MANTISSAS = (1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.2, 2.4, 2.6, 2.8, 3.0, 3.3, 3.6, 3.9, 4.2,
             4.6, 5.0, 5.5, 6.0, 6.6, 7.2, 7.9, 8.6, 9.4)  # fmt: skip
MAX_STEP = 1.1
EDGES_MS: tuple[float, ...] = tuple(round(m * 10.0**k, 6) for k in range(-1, 5) for m in MANTISSAS)
BUCKETS = len(EDGES_MS) + 1  # the last one counts values above every edge (+Inf)


def bucket_of(value_ms: float) -> int:
    """The index of the first bucket whose upper edge is >= value (Prometheus's `le`)."""
    return bisect_left(EDGES_MS, value_ms)


def empty() -> list[int]:
    return [0] * BUCKETS


def add(into: list[int], other: Sequence[int]) -> None:
    for i, n in enumerate(other):
        into[i] += n


def cumulative_seconds(counts: Sequence[int]) -> list[tuple[str, int]]:
    """Prometheus histogram buckets: (`le` in seconds, cumulative count) on every edge, then +Inf."""
    running, out = 0, []
    for edge, n in zip(EDGES_MS, counts):
        running += n
        out.append((repr(round(edge / 1000.0, 9)), running))
    out.append(("+Inf", sum(counts)))
    return out


def quantile_ms(counts: Sequence[int], q: float) -> float | None:
    """The q-quantile, interpolated in its bucket (past the last edge: that edge); None when empty."""
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
