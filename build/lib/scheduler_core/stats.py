"""Sample statistics every analysis reports the same way: nearest-rank percentiles, a CDF in a
fixed number of points, and a 95 % interval over seeded repeats."""

from __future__ import annotations

import math
from collections.abc import Sequence

PERCENTILES: tuple[int, ...] = (50, 90, 99)

# Two-sided 95 % Student t quantiles by degrees of freedom (1 .. 30); above, the normal's 1.96.
_T95: tuple[float, ...] = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def round6(x: float) -> float:
    return round(x, 6)


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile (0 < q <= 100) of an ascending, non-empty sample, by nearest rank."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def percentiles(values: Sequence[float], ordered: bool = False) -> dict[str, float | None]:
    """p50, p90, p99 (nearest rank) and the maximum; None for an empty sample."""
    data = values if ordered else sorted(values)
    if not data:
        return {**{f"p{q}": None for q in PERCENTILES}, "max": None}
    return {**{f"p{q}": round6(nearest_rank(data, q)) for q in PERCENTILES}, "max": round6(data[-1])}


def quantiles(values: Sequence[float], steps: int = 100, ordered: bool = False) -> list[float]:
    """The distribution in `steps + 1` nearest-rank quantiles (0 %, 1 %, ... 100 %): a CDF of any
    sample size in a fixed number of points; empty for an empty sample."""
    data = values if ordered else sorted(values)
    if not data:
        return []
    return [round6(nearest_rank(data, q * 100 / steps)) for q in range(steps + 1)]


def interval95(values: Sequence[float]) -> dict[str, float | int]:
    """Mean and the 95 % confidence interval of the mean (Student t) over independent repeats; one
    repeat gives a zero-width interval (`n` says how many there were)."""
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return {"mean": round6(mean), "low": round6(mean), "high": round6(mean), "n": 1}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = (_T95[n - 2] if n - 1 <= len(_T95) else 1.96) * sd / math.sqrt(n)
    return {"mean": round6(mean), "low": round6(mean - half), "high": round6(mean + half), "n": n}
