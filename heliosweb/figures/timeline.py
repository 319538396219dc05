"""The chunk timeline: the product's central picture, a Gantt strip of prefill launches.

One row per plan (a policy, or a policy under a catalog); one bar per launch, coloured by its
graph's capacity, its padded share hatched and paler. On the `ms` axis launches sit back to back
from the first one (x = ms from the first launch, width = its duration); on the `tokens` axis a
bar spans the tokens it carries and its padding (for plans without durations). Reused by the job
figures, the explain page and the live recipe page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from .contract import Span, base_layout
from .palette import capacity_colour

HOVER = (
    "<b>%{y}</b><br>graph %{customdata[0]} · tokens [%{customdata[1]}, %{customdata[2]})"
    "<br>padding %{customdata[3]} · chooser %{customdata[4]}"
    "<br>predicted %{customdata[5]} ms · %{customdata[6]} %{customdata[7]} ms<extra></extra>"
)


@dataclass(frozen=True)
class TimelineRow:
    """A plan to draw: its label and its launches ({graph, start, end, chooser, predicted_ms} and
    the duration under `duration_key`, e.g. `true_ms` or a measured `ms`)."""

    label: str
    launches: Sequence[Mapping[str, Any]]
    duration_key: str = "true_ms"
    duration_label: str = "true"


@dataclass(frozen=True)
class _Bar:
    row: str
    graph: int
    x0: float
    useful: float
    padded: float
    hover: list[Any]


def _ms(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}"


def _bars(row: TimelineRow, axis: str) -> list[_Bar]:
    bars, clock = [], 0.0
    for launch in row.launches:
        graph, start, end = launch["graph"], launch["start"], launch["end"]
        padding = graph - (end - start)
        duration = launch.get(row.duration_key)
        hover = [graph, start, end, padding, launch.get("chooser", "—"), _ms(launch.get("predicted_ms"))]
        hover += [row.duration_label, _ms(duration)]
        if axis == "tokens":
            bars.append(_Bar(row.label, graph, float(start), float(end - start), float(padding), hover))
            continue
        width = float(duration if duration is not None else launch.get("predicted_ms") or 0.0)
        useful = width * (end - start) / graph if graph else width
        bars.append(_Bar(row.label, graph, clock, useful, width - useful, hover))
        clock += width
    return bars


def chunk_timeline(
    rows: Sequence[TimelineRow],
    *,
    title: str,
    axis: str = "ms",
    marker: tuple[str, int, str] | None = None,
    span: float | None = None,
) -> go.Figure:
    """The Gantt strip: a trace per graph capacity (useful tokens), one `padding` trace, and an
    optional marker (row, x, text), e.g. where a plan stalled. `span` fixes the x axis to [0, span]
    (a prompt's length), so a plan that stalled early still shows how much it left undone."""
    bars = [b for row in rows for b in _bars(row, axis)]
    # Traces are collected and handed to go.Figure once: add_trace re-validates and copies the
    # traces already added, quadratic in the number of graphs.
    traces: list[go.Bar | go.Scatter] = []
    for graph in sorted({b.graph for b in bars}):
        mine = [b for b in bars if b.graph == graph]
        traces.append(
            go.Bar(
                name=f"graph {graph}",
                orientation="h",
                y=[b.row for b in mine],
                x=[b.useful for b in mine],
                base=[b.x0 for b in mine],
                customdata=[b.hover for b in mine],
                hovertemplate=HOVER,
                marker={"color": capacity_colour(graph), "line": {"color": "white", "width": 1}},
                legendgroup=f"graph {graph}",
            )
        )
    padded = [b for b in bars if b.padded > 0]
    if padded:
        traces.append(
            go.Bar(
                name="padding",
                orientation="h",
                y=[b.row for b in padded],
                x=[b.padded for b in padded],
                base=[b.x0 + b.useful for b in padded],
                customdata=[b.hover for b in padded],
                hovertemplate=HOVER,
                marker={
                    "color": [capacity_colour(b.graph) for b in padded],
                    "opacity": 0.45,
                    "pattern": {"shape": "/", "fgcolor": "white"},
                    "line": {"color": "white", "width": 1},
                },
            )
        )
    if marker is not None:
        row, x, text = marker
        traces.append(
            go.Scatter(
                name=text,
                x=[x],
                y=[row],
                mode="markers+text",
                text=[text],
                # Beside the marker, toward the middle: at either end of a fixed axis it would be cut off.
                textposition="top center" if span is None else "top right" if x <= span / 2 else "top left",
                marker={"symbol": "x", "size": 14, "color": "black"},
            )
        )
    labels = [row.label for row in rows]
    layout = base_layout(
        title,
        height=140 + 46 * len(rows),
        barmode="overlay",
        yaxis={"categoryorder": "array", "categoryarray": labels[::-1], "type": "category", "automargin": True},
        xaxis={"title": {"text": "ms from the first launch" if axis == "ms" else "prompt position (tokens)"}},
    )
    if span is not None:
        layout.xaxis.range = [0, span]
    return go.Figure(traces, layout)


def launch_spans(
    process: str, thread: str, launches: Sequence[Mapping[str, Any]], ms_key: str, ms_label: str
) -> list[Span]:
    """A plan's launches back to back for the Chrome trace, each lasting its `ms_key` duration (its
    prediction where that is missing) and carrying it in `args` as `ms_label`."""
    out, clock = [], 0.0
    for l in launches:
        ms = l[ms_key] if l[ms_key] is not None else l["predicted_ms"]
        args = {
            "graph": l["graph"],
            "tokens": [l["start"], l["end"]],
            "padding": l["graph"] - (l["end"] - l["start"]),
            "chooser": l["chooser"],
            "predicted_ms": l["predicted_ms"],
            ms_label: l[ms_key],
        }
        out.append(Span(process, thread, f"graph {l['graph']}", clock, ms, args))
        clock += ms
    return out
