"""A live frame: what the live recipe page draws of one telemetry batch, built once at ingest and
stored with it, so a reconnecting page refills exactly what it missed. Its keys are the points the
live figures read (`heliosweb/figures/live.py`), bounded whatever the batch holds: at most
`MAX_POINTS` rows of each kind, the batch's ITL quantiles, padding share, and each reported
field's mean.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import repeat
from operator import floordiv, itemgetter
from statistics import median
from typing import Any, TypeVar

from helios_client.records import reported

from . import buckets
from .validation import Batch

MAX_POINTS = 300
TTFT_EACH = 3  # a second with more finished requests is drawn as its fastest, median and slowest
_T_MS = itemgetter("t_ms")
_VERSION = itemgetter("version")
T = TypeVar("T")


def frame_of(*, seq: int, batch: Batch, itl_counts: Sequence[int], padded: int, launched: int) -> dict[str, Any]:
    """Frame `seq` of a parsed batch; its launches are read a column at a time, by C loops."""
    records, launches, requests = batch.records, batch.launches, batch.requests
    seconds = list(map(floordiv, launches.t_ms, repeat(1000)))
    return {
        "seq": seq,
        "engine": batch.engine,
        "t0": min(map(_T_MS, records)),
        "t1": max(map(_T_MS, records)),
        "versions": sorted(set(map(_VERSION, records))),
        "launches": len(launches),
        "requests": len(requests),
        "chunk_rows": _chunk_rows(sorted(set(zip(map(int, seconds), launches.graph)))),
        "ttft_rows": _sample(_ttft_rows(requests)),
        "rate_rows": [[s * 1000, n] for s, n in sorted(Counter(map(int, seconds)).items())][-MAX_POINTS:],
        "itl_p50": _round(buckets.quantile_ms(itl_counts, 0.5)),
        "itl_p99": _round(buckets.quantile_ms(itl_counts, 0.99)),
        "padding_share": round(padded / launched, 4) if launched else None,
        **{name: _mean(requests, name) for name in reported()},
    }


def _chunk_rows(runs: Sequence[tuple[int, int]]) -> list[list[Any]]:
    """Each (second, capacity) a line across its second at the capacity's height, then a gap: the
    trace named by the capacity draws the seconds it ran in (one SVG path however many launches)."""
    rows: list[list[Any]] = []
    for second, graph in _sample(runs):
        start, name = second * 1000, str(graph)
        rows += [[start, graph, name], [start + 999, graph, name], [start + 999.5, None, name]]
    return rows


def _ttft_rows(requests: Sequence[dict[str, Any]]) -> list[list[float]]:
    """Every request of a second that has at most TTFT_EACH, else its fastest, median and slowest."""
    per_second: dict[int, list[tuple[float, float]]] = {}
    for r in requests:
        per_second.setdefault(int(r["t_ms"] // 1000), []).append((r["t_ms"], r["ttft_ms"]))
    rows: list[list[float]] = []
    for second, points in sorted(per_second.items()):
        if len(points) > TTFT_EACH:
            points = [
                min(points, key=_SECOND),
                (second * 1000 + 500, median(p[1] for p in points)),
                max(points, key=_SECOND),
            ]
        rows += sorted([round(t, 1), round(ms, 3)] for t, ms in points)
    return rows


_SECOND = itemgetter(1)


def _mean(requests: Sequence[dict[str, Any]], name: str) -> float | None:
    values = [r[name] for r in requests if name in r]
    return round(sum(values) / len(values), 3) if values else None


def _sample(items: Sequence[T]) -> Sequence[T]:
    if len(items) <= MAX_POINTS:
        return items
    step = len(items) / MAX_POINTS
    return [items[int(i * step)] for i in range(MAX_POINTS)]


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
