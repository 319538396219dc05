"""Two numbers both called "the p50 delta", named apart.

- The **difference of percentiles**: p50(after) - p50(before), each percentile over its own
  policy's requests. What a reader of two summary tables computes; it says how the distributions'
  medians moved, not how a request fared.
- The **percentile of per-request differences**: p50 over requests i of (after_i - before_i), the
  same requests under both policies. What a request's owner feels; on skewed traffic the two
  differ by far (+220.79 vs +170.45 ms at p50 on one run).

Every result, page and export that shows one says which (`DIFFERENCE_OF_PERCENTILES`,
`PERCENTILE_OF_DIFFERENCES`); where both exist both are given. Results stored before the names
existed are read through `capacity_differences`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .stats import PERCENTILES, percentiles, round6

DIFFERENCE_OF_PERCENTILES = "difference of percentiles"
PERCENTILE_OF_DIFFERENCES = "percentile of per-request differences"


def column(definition: str) -> str:
    """A definition as an export's column prefix: 'difference_of_percentiles'."""
    return definition.replace(" ", "_").replace("-", "_")


def difference_of_percentiles(after: Sequence[float], before: Sequence[float]) -> dict[str, Any]:
    """p50, p90, p99 of `after` minus those of `before` (nearest rank each), None for an empty side."""
    a, b = percentiles(after), percentiles(before)
    out: dict[str, Any] = {"definition": DIFFERENCE_OF_PERCENTILES}
    for q in PERCENTILES:
        x, y = a[f"p{q}"], b[f"p{q}"]
        out[f"p{q}"] = None if x is None or y is None else round6(x - y)
    return out


def capacity_differences(row: Mapping[str, Any]) -> dict[str, Any]:
    """A capacity delta row's difference of TTFT percentiles at p50 and p99 (intervals over the
    repeats), from its own keys or, in a result stored before they were named, from the old
    `ttft_p50_ms` / `ttft_p99_ms`. Empty when the row compares nothing."""
    out = {}
    for q in ("p50", "p99"):
        value = row.get(f"difference_of_ttft_{q}_ms", row.get(f"ttft_{q}_ms"))
        if value is not None:
            out[q] = value
    return out
