"""Figures cut to what a screen can show, before they leave the server.

A 19,000-request job's TTFT CDF is 19,000 points per policy; a chart on the widest page is about a
thousand pixel columns wide, and a line drawn through 19 points in one column looks exactly like
one drawn through that column's lowest and highest. So a long line trace keeps, per column of its
x range (on the axis's own scale: a log axis's columns are equal in log x), the point with the
least y and the one with the most, plus the trace's first and last point: peaks and extremes stay,
and at most `2 * BUCKETS + 2` points reach the browser. Per-point attributes (hover text, custom
data, marker arrays, error bars) keep the same points. Anything whose x is not a sorted numeric
line (bars, markers, lines broken by gaps, text) is left as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

BUCKETS = 1000  # pixel columns: charts on the pages are at most about 1,200 px wide
PER_POINT = ("text", "hovertext", "customdata", "ids")  # trace keys holding one value per point
NESTED_PER_POINT = ("marker", "error_y", "error_x")  # dicts whose list values are per point

Json = dict[str, Any]


def decimate_figure(figure: Json, buckets: int = BUCKETS) -> Json:
    """`figure` ({data, layout}, as `to_plotly_json` gives it) with each long line trace decimated in place."""
    layout = figure.get("layout") or {}
    for trace in figure.get("data") or []:
        decimate_trace(trace, buckets, log=on_log_x(trace, layout))
    return figure


def on_log_x(trace: Json, layout: Json) -> bool:
    """Whether the trace's x axis (`x`, `x2`, ... in the layout, as a dict) is logarithmic."""
    axis = layout.get("xaxis" + str(trace.get("xaxis") or "x")[1:]) or {}
    return bool(axis.get("type") == "log")


def decimate_trace(trace: Json, buckets: int = BUCKETS, *, log: bool = False) -> None:
    """Keep the points `kept_points` picks, in every per-point array of the trace (in place)."""
    if trace.get("type", "scatter") != "scatter" or "lines" not in str(trace.get("mode", "lines")):
        return
    if "text" in str(trace.get("mode", "")):
        return
    x, y = trace.get("x"), trace.get("y")
    if not isinstance(x, Sequence) or not isinstance(y, Sequence) or len(x) != len(y) or len(x) <= 2 * buckets + 2:
        return
    keep = kept_points(list(x), list(y), buckets, log=log)
    if keep is None:
        return
    n = len(x)
    for holder in [trace] + [trace[k] for k in NESTED_PER_POINT if isinstance(trace.get(k), dict)]:
        for key, value in list(holder.items()):
            if (key in ("x", "y") or key in PER_POINT or holder is not trace) and _per_point(value, n):
                holder[key] = [value[i] for i in keep]


def kept_points(x: list[Any], y: list[Any], buckets: int, *, log: bool = False) -> list[int] | None:
    """Indices to keep: first, last, and per x column the least and the greatest y (in order).
    None when the trace is not a sorted numeric line without gaps (it is then left whole)."""
    if not all(_number(v) for v in x) or not all(_number(v) for v in y):
        return None
    if any(b < a for a, b in zip(x, x[1:])) or (log and x[0] <= 0):
        return None
    scale = math.log10 if log else float
    low, high = scale(x[0]), scale(x[-1])
    width = (high - low) / buckets or 1.0
    best: dict[int, tuple[int, int]] = {}  # column -> (index of least y, index of greatest y)
    for i, xv in enumerate(x):
        column = min(buckets - 1, int((scale(xv) - low) / width))
        if column not in best:
            best[column] = (i, i)
            continue
        least, most = best[column]
        best[column] = (i if y[i] < y[least] else least, i if y[i] > y[most] else most)
    keep = {0, len(x) - 1}
    for least, most in best.values():
        keep.update((least, most))
    return sorted(keep)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _per_point(value: Any, n: int) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == n
