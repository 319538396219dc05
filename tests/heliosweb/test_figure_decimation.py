"""Figures are cut to the screen's resolution before they leave the server: long line traces keep
their extremes and stay within the point budget; everything else is sent whole."""

from __future__ import annotations

import json
import math
import random

import plotly.graph_objects as go

from heliosweb.figures.contract import Figure, Growth, KindViews, to_json
from heliosweb.figures.decimate import BUCKETS, decimate_figure, decimate_trace, kept_points


def noisy_line(n: int, seed: int = 1) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    x = sorted(rng.uniform(0, 1e6) for _ in range(n))
    y = [math.sin(v / 5e4) + rng.gauss(0, 0.1) for v in x]
    return x, y


def test_a_long_line_keeps_its_first_last_least_and_greatest_points_within_the_budget():
    x, y = noisy_line(19_000)
    y[7_777] = 50.0  # one spike: a request 50 times slower than the rest
    y[12_345] = -50.0
    trace = {"type": "scatter", "mode": "lines", "x": list(x), "y": list(y), "text": [f"#{i}" for i in range(len(x))]}
    decimate_trace(trace, buckets=500)
    assert len(trace["x"]) <= 2 * 500 + 2
    assert max(trace["y"]) == 50.0 and min(trace["y"]) == -50.0
    assert (trace["x"][0], trace["x"][-1]) == (x[0], x[-1])
    # per-point text stays with its point
    assert trace["text"][trace["y"].index(50.0)] == "#7777" and trace["text"][trace["y"].index(-50.0)] == "#12345"
    assert trace["x"] == sorted(trace["x"])


def test_every_pixel_column_keeps_its_own_least_and_greatest_y():
    x, y = noisy_line(10_000, seed=3)
    keep = kept_points(x, y, 100)
    assert keep is not None
    width = (x[-1] - x[0]) / 100
    for column in range(100):
        members = [i for i in range(len(x)) if min(99, int((x[i] - x[0]) / width)) == column]
        if members:
            kept = {y[k] for k in keep if k in members}
            assert min(y[i] for i in members) in kept and max(y[i] for i in members) in kept


def test_a_cdf_on_a_log_axis_is_cut_by_columns_of_log_x():
    rng = random.Random(2)
    values = sorted(10 ** rng.uniform(0, 6) for _ in range(20_000))
    shares = [(i + 1) / len(values) for i in range(len(values))]
    figure = {
        "data": [{"type": "scatter", "mode": "lines", "x": list(values), "y": shares}],
        "layout": {"xaxis": {"type": "log"}},
    }
    decimate_figure(figure, buckets=200)
    kept = figure["data"][0]["x"]
    assert len(kept) <= 402
    # a column of log x each: the first decade (1-10 ms) keeps points although it is 0.001 % of linear x
    assert sum(1 for v in kept if v < 10) >= 20


def test_what_is_not_a_long_sorted_numeric_line_is_sent_whole():
    x, y = noisy_line(5_000)
    short = {"type": "scatter", "mode": "lines", "x": x[:100], "y": y[:100]}
    unsorted = {"type": "scatter", "mode": "lines", "x": x[::-1], "y": y}
    gaps = {"type": "scatter", "mode": "lines", "x": [*x[:2500], None, *x[2501:]], "y": y}
    markers = {"type": "scatter", "mode": "markers", "x": x, "y": y}
    bars = {"type": "bar", "x": x, "y": y}
    for trace in (short, unsorted, gaps, markers, bars):
        before = {k: list(v) if isinstance(v, list) else v for k, v in trace.items()}
        decimate_trace(trace, buckets=100)
        assert trace == before


def test_the_figures_answer_is_decimated_except_a_figure_live_events_grow():
    x, y = noisy_line(3 * BUCKETS)
    cdf = Figure("cdf", "CDF", go.Figure([go.Scatter(x=x, y=y, mode="lines")]))
    live = Figure("events", "events", go.Figure([go.Scatter(x=x, y=y, mode="lines")]))
    views = KindViews(figures=lambda job: [], growth=(Growth("measurement", "events", "i", "v"),))
    sent = {f["id"]: f for f in json.loads(to_json([cdf, live], views))}
    assert len(sent["cdf"]["figure"]["data"][0]["x"]) <= 2 * BUCKETS + 2 < len(x)
    assert max(sent["cdf"]["figure"]["data"][0]["y"]) == max(y)
    assert len(sent["events"]["figure"]["data"][0]["x"]) == len(x)  # the page appends to it point by point


def test_a_figure_as_data_is_plotlys_own_json_and_cutting_it_leaves_the_figure_whole():
    """`Figure.as_dict` shares the point lists instead of copying them: the same JSON as Plotly's
    `to_plotly_json`, and decimating the data (as `/figures/` does) changes nothing in the figure."""
    x, y = noisy_line(20_000)
    fig = go.Figure(
        [go.Scatter(x=x, y=y, mode="lines", marker={"color": ["red"] * len(x)}), go.Bar(x=["a", "b"], y=[1, 2])],
        go.Layout(title={"text": "t"}, annotations=[{"text": "note", "x": 1, "y": 1}]),
    )
    figure = Figure("f", "F", fig, "s")
    data = figure.as_dict()["figure"]
    plotly_own = json.loads(fig.to_json())
    assert json.loads(json.dumps(data)) == {k: plotly_own[k] for k in ("data", "layout")}
    decimate_figure(data)
    assert len(data["data"][0]["x"]) < len(x) and len(data["data"][0]["marker"]["color"]) < len(x)
    assert len(fig.data[0].x) == len(x) == len(fig.data[0].marker.color)
    assert json.loads(fig.to_json()) == plotly_own
