"""The figure contract between a job kind and the browser.

A kind's `KindViews` says which of its stored events the figures read, builds its figures from a
`JobData` (the stored result and those events), may declare how live events grow a figure
(`Growth`, applied in the browser with `Plotly.extendTraces`), and may offer tables (CSV) and
launches (a Chrome trace). The browser knows none of the kinds: it draws what it is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import plotly.graph_objects as go
from plotly.utils import PlotlyJSONEncoder

from scheduler_core.comparison import Pair, default_pair, policies_run
from scheduler_core.typed_json import read_as

from .decimate import decimate_figure
from .summary import describe

Json = dict[str, Any]
Table = list[dict[str, Any]]
R = TypeVar("R")


@dataclass(frozen=True)
class JobData:
    """What figures are built from: a job's identity, parameters, result and stored events."""

    id: int
    kind: str
    status: str
    params: Json
    result: Json | None
    events: Sequence[Json] = ()
    seq: int = 0  # the events above were read up to this number
    recipe: str | None = None  # the job's recipe, by name
    pair: Pair | None = None  # what every delta compares: the reader's pick, else the first two policies run

    def compared(self) -> Pair | None:
        """What every delta compares: the pair picked, else the first two policies the job ran."""
        return self.pair or default_pair(policies_run(self.result))

    def events_of(self, event_type: str) -> list[Json]:
        return [e for e in self.events if e.get("type") == event_type]

    def result_as(self, declared: type[R]) -> R:
        """The stored result read as its kind's declared type (`Analysis.result`, which a test holds
        every kind's real result to), so mypy checks the figures' reads; the job must have one."""
        if self.result is None:
            raise ValueError(f"job {self.id} has no result yet")
        return read_as(self.result, declared)


@dataclass(frozen=True)
class Figure:
    id: str
    title: str
    figure: go.Figure
    summary: str | None = None  # its text alternative; by default `describe`d from the figure

    def as_dict(self) -> Json:
        """The figure as JSON data, its dicts its own and its point lists shared with the Plotly
        object: `to_plotly_json` deep-copies every point and walks them all again looking for numpy
        arrays, half the time a 19,500-request job's figures took; the payload's readers
        (`decimate`, compare's relabelling) replace a trace's lists, never change one in place."""
        figure = {"data": _dicts_copied(self.figure._data), "layout": _dicts_copied(self.figure._layout)}
        summary = self.summary or describe(figure.get("data") or [], figure.get("layout") or {})
        return {"id": self.id, "title": self.title, "figure": figure, "summary": summary}


def many_points(data: list[Json], layout: go.Layout | Json) -> go.Figure:
    """A figure whose traces this code writes with thousands of points each (a 19,500-request
    job's CDFs and timelines), built without Plotly's check of every point (its `_validate=False`:
    about 8x faster at 15,000 points, the same JSON; a test holds it to the checked build)."""
    return go.Figure(data, layout, _validate=False)


def _dicts_copied(value: Any) -> Any:
    """`value` with every dict (and list of dicts: traces, annotations) copied, other lists and
    values shared; a list is one of dicts when its first item is (a per-point list never is)."""
    if isinstance(value, dict):
        return {k: _dicts_copied(v) for k, v in value.items()}
    if isinstance(value, list | tuple) and value and isinstance(value[0], dict):
        return [_dicts_copied(v) for v in value]
    return value


@dataclass(frozen=True)
class Growth:
    """Live events of type `event` append point (event[x], event[y]) to trace `trace` of figure
    `figure` (or to the trace numbered by the event's `trace_field`), keeping `max_points`; an
    event without either value adds nothing.

    `points` names an event field of rows instead: `[x, y]`, or `[x, y, name]` for the trace named
    so (added from `traces[name]`, else `traces[""]`, when the figure has none yet). `same_x`:
    "sum" adds a point at its trace's last x to that point, "drop" drops a point not past it.
    `x_span`: the x axis shows the last `x_span` up to the newest x, or to the declared range's end
    when later (numbers: a time axis in ms)."""

    event: str
    figure: str
    x: str = ""
    y: str = ""
    trace: int = 0
    trace_field: str | None = None
    max_points: int = 5000
    points: str | None = None
    same_x: str | None = None
    traces: dict[str, Json] | None = None
    x_span: float | None = None

    def as_dict(self) -> Json:
        """Every field; of `points`, `same_x`, `traces` and `x_span`, only those set."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in values.items() if v is not None or k not in _ROW_RULES}


_ROW_RULES = ("points", "same_x", "traces", "x_span")


@dataclass(frozen=True)
class Span:
    """One launch on a timeline, for the Chrome trace: a process (policy, catalog), a thread
    (lane), when and how long (ms), and what it carried (`args`). `flow` links one request's chunks."""

    process: str
    thread: str
    name: str
    start_ms: float
    duration_ms: float
    args: Json
    flow: int | str | None = None  # a request id (an engine's may be a string)
    category: str = "launch"  # the trace event's `cat` (a request's own slice: "request")


def _no_tables(job: JobData) -> dict[str, Table]:
    return {}


@dataclass(frozen=True)
class KindViews:
    figures: Callable[[JobData], list[Figure]]
    event_types: tuple[str, ...] = ()
    growth: tuple[Growth, ...] = ()
    tables: Callable[[JobData], dict[str, Table]] = field(default=_no_tables)
    spans: Callable[[JobData], list[Span]] | None = None
    trace_notes: Callable[[JobData], Json] | None = None  # what the trace holds (its `otherData`)


def to_json(figures: Sequence[Figure], views: KindViews | None = None, *, seq: int = 0) -> str:
    """The `/figures/` answer, `[{id, title, figure, seq, growth, refresh_on}]`: each figure with
    the event number it was built up to, the growth rules that target it and the live event types
    after which the page asks again (the kind's other events its figures read), serialised by
    Plotly's own encoder."""
    return json.dumps(payload(figures, views, seq), cls=PlotlyJSONEncoder)


def payload(figures: Sequence[Figure], views: KindViews | None, seq: int) -> list[Json]:
    """Each figure cut to what a screen shows (`decimate`), except those live events grow (the page
    appends to them point by point); its text summary is read from every point."""
    growth = views.growth if views else ()
    grown = {g.event for g in growth}
    refresh = [t for t in (views.event_types if views else ()) if t not in grown]
    out = []
    for f in figures:
        rules = [g.as_dict() for g in growth if g.figure == f.id]
        data = f.as_dict()
        if not rules:
            decimate_figure(data["figure"])
        out.append({**data, "seq": seq, "growth": rules, "refresh_on": refresh})
    return out


def embedded(figures: Sequence[Figure]) -> tuple[str, list[Json]]:
    """For a page that embeds its figures: the `to_json` text and a slot per figure ({id, title,
    height, summary}), which the page renders as the figure's box of its height with its text
    summary, so the text paints first and nothing moves when the chart is drawn into it."""
    return embedded_payload(payload(figures, None, 0))


def embedded_payload(payload: Sequence[Json]) -> tuple[str, list[Json]]:
    """`embedded` for figures already as data ({id, title, figure, summary}: compare's overlays)."""
    slots = [
        {
            "id": f["id"],
            "title": f["title"],
            "height": f["figure"]["layout"].get("height") or 450,
            "summary": f["summary"],
        }
        for f in payload
    ]
    return json.dumps(payload, cls=PlotlyJSONEncoder), slots


def empty(figure_id: str, title: str, message: str) -> Figure:
    """A figure that says why it has nothing to draw and what to do about it."""
    fig = go.Figure(layout=base_layout(title, height=220))
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font={"size": 14})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return Figure(figure_id, title, fig)


# A log axis ticked 1, 2, 5, 10, 20, 50 ... and labelled with whole values: Plotly's default labels
# 20 and 50 as a small "2" and "5" between the powers of ten, which reads as 2 ms next to 10 ms.
LOG_AXIS: dict[str, Any] = {"type": "log", "dtick": "D2", "tickformat": "~g"}


def base_layout(title: str, *, height: int = 380, **extra: Any) -> go.Layout:
    """The house layout: title, compact margins, legend on top, no Plotly logo in the modebar. The
    title sits below the band the modebar's buttons take at the top (they never cover it)."""
    return go.Layout(
        title={
            "text": title,
            "x": 0,
            "xanchor": "left",
            "xref": "paper",
            "y": 1,
            "yanchor": "top",
            "yref": "container",
            "pad": {"t": 34},
        },
        height=height,
        margin={"l": 70, "r": 20, "t": 76, "b": 50},
        legend={"orientation": "v", "x": 1.01, "xanchor": "left", "y": 1, "yanchor": "top"},  # never over a title
        template="none",  # plotly.js's own light defaults; a full template costs seconds to validate and KBs per figure
        **extra,
    )
