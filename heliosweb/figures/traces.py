"""A stored trace's pictures, from its summary alone: arrivals per minute (or per wider bin, for a
trace longer than a day) and the prompt and output token CDFs (101 quantiles each)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from .contract import LOG_AXIS, Figure, base_layout


def _cdf(figure_id: str, title: str, values: list[float], colour: str) -> Figure:
    share = [i / (len(values) - 1) for i in range(len(values))] if len(values) > 1 else [1.0]
    figure = go.Figure(
        [go.Scatter(x=values, y=share, mode="lines", line={"color": colour, "shape": "hv"}, name="share")],
        base_layout(
            title,
            height=300,
            showlegend=False,
            xaxis={"title": {"text": "tokens"}, **LOG_AXIS},
            yaxis={"title": {"text": "share of requests"}, "range": [0, 1]},
        ),
    )
    return Figure(figure_id, title, figure)


def trace_figures(summary: dict[str, Any], prefix: str) -> list[Figure]:
    """Three figures, their ids prefixed by `prefix` (several traces share one page)."""
    arrivals = summary["arrivals"]
    minutes = arrivals["bin_s"] / 60
    counts = arrivals["counts"]
    per = "minute" if minutes == 1 else f"{minutes:g} minutes"
    bars = go.Figure(
        [go.Bar(x=[i * minutes for i in range(len(counts))], y=counts, marker={"color": "#4e79a7"}, name="arrivals")],
        base_layout(
            f"Arrivals per {per}",
            height=300,
            showlegend=False,
            bargap=0,
            xaxis={"title": {"text": "minutes since the first request"}},
            yaxis={"title": {"text": "requests"}},
        ),
    )
    return [
        Figure(f"{prefix}-arrivals", f"Arrivals per {per}", bars),
        _cdf(f"{prefix}-prompt-cdf", "Prompt tokens CDF", summary["prompt_cdf"], "#e15759"),
        _cdf(f"{prefix}-output-cdf", "Output tokens CDF", summary["output_cdf"], "#59a14f"),
    ]
