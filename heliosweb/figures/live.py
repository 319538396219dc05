"""The live recipe page's figures, in the figure contract the job pages use: each chart declared here
with how a live frame (`heliosweb/telemetry/frames.py`) grows it, drawn and grown by figures.js.

Every chart spans the rolling window (`WINDOW_MS`) on a time axis in Unix milliseconds, marks each
policy change, and says it is empty until its first point grows. Each reported field of the request
record (`helios_client.records.reported`) is a chart of its own: its per-batch mean.
"""

from __future__ import annotations

import time
from typing import Any

import plotly.graph_objects as go
from helios_client.records import reported

from heliosweb.recipes.selectors import change_label

from .contract import Figure, Growth, KindViews, base_layout, payload
from .palette import capacity_colour

WINDOW_MS = 5 * 60 * 1000
NO_LAUNCHES, NO_REQUESTS = "no prefill launches reported yet", "no finished requests reported yet"
GREY = "#7f7f7f"  # a capacity without a colour of its own


def live_figures(*, changes: list[dict[str, Any]], capacities: list[int]) -> list[dict[str, Any]]:
    """The page's `[{id, title, figure, seq, growth, refresh_on}]`: empty charts the websocket's
    frames fill (`seq` 0: every frame grows them), asked for again after a policy change."""
    figures, growth = _declared(changes, capacities)
    views = KindViews(figures=lambda _: figures, event_types=("frame", "policies"), growth=tuple(growth))
    return payload(figures, views, 0)


def _declared(changes: list[dict[str, Any]], capacities: list[int]) -> tuple[list[Figure], list[Growth]]:
    chunk = {"type": "scatter", "mode": "lines", "hovertemplate": "graph %{y}<br>%{x}<extra></extra>"}
    chunk_traces = {str(c): {**chunk, "line": {"width": 6, "color": capacity_colour(c)}} for c in capacities}
    chunk_traces[""] = {**chunk, "line": {"width": 6, "color": GREY}}
    ttft = {**_trace("markers", "TTFT"), "marker": {"size": 4}}
    charts: list[tuple[str, str, str, list[Any], str, str]] = [
        ("fig-chunks", "Graph capacities run each second", "tokens", [], NO_LAUNCHES, CHUNKS),
        ("fig-ttft", "TTFT per finished request", "ms", [ttft], NO_REQUESTS, TTFT),
        ("fig-itl", "Inter-token latency per batch (p50, p99)", "ms", [_trace("lines", "p50"), _trace("lines", "p99")], NO_REQUESTS, ITL),
        ("fig-rate", "Prefill launches per second", "launches/s", [_trace("bar", "launches/s")], NO_LAUNCHES, RATE),
        ("fig-padding", "Padding share of prefill tokens", "share", [_trace("lines", "padding")], NO_LAUNCHES, PADDING),
    ]  # fmt: skip
    # Per trace, as many points as the window shows: a line per capacity is three rows a second
    # (from, to, gap), TTFT at most three a second, launches one bar a second, the others one a batch.
    growth = [
        _grow("fig-chunks", points="chunk_rows", same_x="drop", traces=chunk_traces, max_points=900),
        _grow("fig-ttft", points="ttft_rows", max_points=900),
        _grow("fig-itl", x="t1", y="itl_p50", trace=0, max_points=800),
        _grow("fig-itl", x="t1", y="itl_p99", trace=1, max_points=800),
        _grow("fig-rate", points="rate_rows", same_x="sum", max_points=300),
        _grow("fig-padding", x="t1", y="padding_share", max_points=800),
    ]
    for name, r in reported().items():
        summary = f"{r.title} ({r.unit}): the mean of each reported batch over the last five minutes."
        empty = f"no {name} reported yet"  # an optional field: an engine may leave it out
        charts.append((f"fig-{name}", r.title, r.unit, [_trace("lines", r.unit)], empty, summary))
        growth.append(_grow(f"fig-{name}", x="t1", y=name, max_points=800))
    return [_chart(*chart, changes) for chart in charts], growth


def _grow(figure_id: str, **rule: Any) -> Growth:
    return Growth("frame", figure_id, x_span=WINDOW_MS, **rule)


def _trace(mode: str, name: str) -> dict[str, Any]:
    kind = {"type": "bar"} if mode == "bar" else {"type": "scatter", "mode": mode}
    return {**kind, "name": name, "x": [], "y": []}


def _chart(
    figure_id: str, title: str, unit: str, traces: list[Any], empty: str, summary: str, changes: list[dict[str, Any]]
) -> Figure:
    """One empty chart over the window that ends now (not Plotly's default of the year 2000), a
    dotted line and a label at each policy change, and a note saying what it waits for."""
    now = time.time() * 1000
    log = unit in ("ms", "tokens")
    marks = [c for c in changes if isinstance(c.get("decided_at"), float | int)]
    layout = base_layout(
        title,
        height=280,
        xaxis={"type": "date", "range": [now - WINDOW_MS, now]},
        # whole labels on log axes (20 and 50, not a small "2" and "5" after 10)
        yaxis={"title": {"text": unit}, "type": "log" if log else "linear", "rangemode": "tozero"}
        | ({"tickformat": "~g"} if log else {}),
        showlegend=figure_id in ("fig-chunks", "fig-itl"),
        barmode="stack",  # a second two frames reported apart is one bar, their sum
        shapes=[_marker_line(c["decided_at"]) for c in marks],
        annotations=[*(_marker_label(c) for c in marks), _note(empty)],
    )
    return Figure(figure_id, title, go.Figure(data=traces, layout=layout), summary=summary)


def _marker_line(at: float) -> dict[str, Any]:
    line = {"color": "#444", "width": 1, "dash": "dot"}
    return {"type": "line", "xref": "x", "yref": "paper", "x0": at, "x1": at, "y0": 0, "y1": 1, "line": line}


def _marker_label(change: dict[str, Any]) -> dict[str, Any]:
    return {
        "xref": "x", "yref": "paper", "x": change["decided_at"], "y": 1, "yanchor": "bottom", "xanchor": "right",
        "showarrow": False, "text": change_label(change), "font": {"size": 10}, "bgcolor": "rgba(255,255,255,0.8)",
    }  # fmt: skip


def _note(text: str) -> dict[str, Any]:
    """The empty chart's note; figures.js drops an annotation named "empty" once points grow."""
    return {
        "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False, "text": text,
        "font": {"color": "#595959"}, "name": "empty",
    }  # fmt: skip


CHUNKS = (
    "The graph capacities the recipe's engines ran in each second of the last five minutes, one line per capacity; "
    "a dotted line marks each policy change."
)
TTFT = (
    "Time to first token of each finished request over the last five minutes (log scale; a second with more than "
    "three in a batch is drawn as its fastest, median and slowest); a dotted line marks each policy change."
)
ITL = "Inter-token latency per reported batch, p50 and p99, over the last five minutes (log scale)."
RATE = "Prefill launches per second over the last five minutes."
PADDING = "The share of prefill tokens that were padding, per report, over the last five minutes."
