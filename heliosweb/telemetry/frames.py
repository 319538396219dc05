"""A live frame: what the live recipe page draws of one telemetry batch, built once at ingest and
stored with it, so a reconnecting page refills from the database exactly what it missed.

Bounded whatever the batch holds: at most `MAX_POINTS` chunk points and TTFT points (evenly
strided), launch counts per second, the batch's ITL quantiles and padding share.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import repeat
from operator import floordiv, itemgetter
from typing import Any, TypeVar

from . import buckets
from .validation import Launches

MAX_POINTS = 300
_T_MS = itemgetter("t_ms")
_VERSION = itemgetter("version")
T = TypeVar("T")


def frame_of(
    *,
    seq: int,
    engine: str,
    records: Sequence[dict[str, Any]],
    launches: Launches,
    requests: Sequence[dict[str, Any]],
    itl_counts: Sequence[int],
    padded: int,
    launched: int,
) -> dict[str, Any]:
    """`launches` and `requests` are the records' two kinds (as `validation.parse_batch` returns
    them); the launches are read a column at a time, by C loops."""
    per_second = Counter(map(int, map(floordiv, launches.t_ms, repeat(1000))))
    t, graph, version = launches.t_ms, launches.graph, launches.version
    return {
        "seq": seq,
        "engine": engine,
        "t0": min(map(_T_MS, records)),
        "t1": max(map(_T_MS, records)),
        "versions": sorted(set(map(_VERSION, records))),
        "launches": len(launches),
        "requests": len(requests),
        "chunks": [[round(t[i], 1), graph[i], version[i]] for i in _sample(range(len(launches)))],
        "ttft": [[round(r["t_ms"], 1), round(r["ttft_ms"], 3), r["version"]] for r in _sample(requests)],
        "per_second": sorted(per_second.items()),
        "itl_p50": _round(buckets.quantile_ms(itl_counts, 0.5)),
        "itl_p99": _round(buckets.quantile_ms(itl_counts, 0.99)),
        "padding_share": round(padded / launched, 4) if launched else None,
    }


def _sample(items: Sequence[T]) -> Sequence[T]:
    if len(items) <= MAX_POINTS:
        return items
    step = len(items) / MAX_POINTS
    return [items[int(i * step)] for i in range(MAX_POINTS)]


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
