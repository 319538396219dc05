"""A live frame: what the live recipe page draws of one telemetry batch, built once at ingest and
stored with it, so a reconnecting page refills from the database exactly what it missed.

Bounded whatever the batch holds: at most `MAX_POINTS` chunk points and TTFT points (evenly
strided), launch counts per second, the batch's ITL quantiles and padding share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import buckets

MAX_POINTS = 300


def frame_of(
    *, seq: int, engine: str, records: Sequence[dict[str, Any]], itl_counts: Sequence[int], padded: int, launched: int
) -> dict[str, Any]:
    launches = [r for r in records if r["type"] == "launch"]
    requests = [r for r in records if r["type"] == "request"]
    per_second: dict[int, int] = {}
    for r in launches:
        second = int(r["t_ms"] // 1000)
        per_second[second] = per_second.get(second, 0) + 1
    times = [r["t_ms"] for r in records]
    return {
        "seq": seq,
        "engine": engine,
        "t0": min(times),
        "t1": max(times),
        "versions": sorted({r["version"] for r in records}),
        "launches": len(launches),
        "requests": len(requests),
        "chunks": [[round(r["t_ms"], 1), r["graph"], r["version"]] for r in _sample(launches)],
        "ttft": [[round(r["t_ms"], 1), round(r["ttft_ms"], 3), r["version"]] for r in _sample(requests)],
        "per_second": sorted(per_second.items()),
        "itl_p50": _round(buckets.quantile_ms(itl_counts, 0.5)),
        "itl_p99": _round(buckets.quantile_ms(itl_counts, 0.99)),
        "padding_share": round(padded / launched, 4) if launched else None,
    }


def _sample(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(items) <= MAX_POINTS:
        return items
    step = len(items) / MAX_POINTS
    return [items[int(i * step)] for i in range(MAX_POINTS)]


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
