"""pulse: the diagnostic stream; each event at the second it was emitted, growing live."""

from __future__ import annotations

import plotly.graph_objects as go

from .contract import Figure, Growth, JobData, KindViews, base_layout

MAX_POINTS = 5000


def figures(job: JobData) -> list[Figure]:
    events = job.events_of("measurement")[-MAX_POINTS:]
    fig = go.Figure(layout=base_layout("Events as emitted (event number vs seconds since the start)"))
    # SVG, not scattergl: WebGL traces generate code at run time, which the Content-Security-Policy refuses.
    # A line, no markers: SVG markers are a DOM node per point, and Plotly redraws them all on each
    # live extend (5,000 markers cost 100-300 ms a frame; the line's one path a few ms).
    fig.add_scatter(name="pulse", x=[e["i"] for e in events], y=[e["elapsed_s"] for e in events], mode="lines")
    fig.update_xaxes(title_text="event")
    fig.update_yaxes(title_text="s since the start")
    return [Figure("events", "Events", fig)]


VIEWS = KindViews(
    figures,
    event_types=("measurement",),
    growth=(Growth("measurement", "events", x="i", y="elapsed_s", max_points=MAX_POINTS),),
)
