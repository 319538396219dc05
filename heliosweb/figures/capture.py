"""capture: each graph shape's median duration with its p10-p90, a trace per boot (boots of one
recipe overlaid), drifted shapes hatched with the slowdown the drift achieved written on them.
While the job runs, measurements grow the figure. A finished drifted capture adds a figure of
each drifted shape's median under the drift next to its undisturbed median, and the ratio."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from gpu_runner.events import shape_label
from gpu_runner.results import CaptureResult, boots_of

from .contract import LOG_AXIS, Figure, Growth, JobData, KindViews, Table, base_layout

BOOT_COLOURS = (
    "#636efa",
    "#00a676",
    "#ffa15a",
    "#19d3f3",
    "#ff6692",
    "#b6e880",
    "#ff97ff",
    "#fecb52",
    "#8c564b",
    "#17becf",
)


def boot_measurements(job: JobData) -> list[list[dict[str, Any]]]:
    """Per boot, its measurements: from the result, or as streamed so far."""
    if job.result is not None:
        return [b["measurements"] for b in boots_of(job.result_as(CaptureResult))]
    count = int(job.params.get("boots", 1))
    streamed: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    for event in job.events_of("measurement"):
        if 0 <= event.get("boot", 0) < count:
            streamed[event.get("boot", 0)].append(event)
    return streamed


def _slowdown(m: dict[str, Any]) -> str:
    """`x1.63` on a drifted shape (its median under the drift over its undisturbed median)."""
    return f"\u00d7{m['drift_slowdown']:.2f}" if m.get("drifted") and "drift_slowdown" in m else ""


def shapes_figure(boots: list[list[dict[str, Any]]], title: str) -> go.Figure:
    traces = []
    for index, rows in enumerate(boots):
        traces.append(
            go.Bar(
                name=f"boot {index}",
                x=[shape_label(m["prefill"], m["decode"]) for m in rows],
                y=[m["median_ms"] for m in rows],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [m["p90_ms"] - m["median_ms"] for m in rows],
                    "arrayminus": [m["median_ms"] - m["p10_ms"] for m in rows],
                },
                marker={
                    "color": BOOT_COLOURS[index % len(BOOT_COLOURS)],
                    "pattern": {"shape": ["x" if m.get("drifted") else "" for m in rows]},
                    "line": {"color": ["#d62728" if m.get("drifted") else "white" for m in rows], "width": 2},
                },
                text=[_slowdown(m) for m in rows],
                textposition="outside",
                textfont={"color": "#d62728"},
                customdata=[
                    [
                        f"drifted: {_slowdown(m)} its undisturbed {m['clean_median_ms']:.4f} ms"
                        if "clean_median_ms" in m
                        else ("drifted (timed under load)" if m.get("drifted") else ""),
                        m["samples"],
                    ]
                    for m in rows
                ],
                hovertemplate="%{x}: median %{y:.4f} ms, %{customdata[1]} samples %{customdata[0]}<extra></extra>",
            )
        )
    layout = base_layout(
        title, barmode="group", yaxis={"title": {"text": "ms"}, **LOG_AXIS}, xaxis={"title": {"text": "graph shape"}}
    )
    return go.Figure(traces, layout)


def drift_figure(boots: list[list[dict[str, Any]]], params: dict[str, Any]) -> go.Figure | None:
    """Each drifted shape's median under the drift next to its undisturbed median (same boot, same
    shape, timed right after), the achieved slowdown written on it; None without drifted shapes."""
    rows = [(b, m) for b, ms in enumerate(boots) for m in ms if "drift_slowdown" in m]
    if not rows:
        return None
    labels = [("" if len(boots) == 1 else f"boot {b} · ") + shape_label(m["prefill"], m["decode"]) for b, m in rows]
    ratios = [m["drift_slowdown"] for _, m in rows]
    low, high = min(ratios), max(ratios)
    achieved = f"\u00d7{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"\u00d7{low:.2f} to \u00d7{high:.2f}"
    title = f"Drift achieved: {achieved} (load {params.get('drift_load', '?')})"
    if low < 1:
        title += "; below \u00d71.00 the load did not slow that shape"
    undisturbed = go.Bar(
        name="undisturbed median",
        x=labels,
        y=[m["clean_median_ms"] for _, m in rows],
        marker={"color": "#9aa0a6"},
        hovertemplate="%{x}: undisturbed median %{y:.4f} ms<extra></extra>",
    )
    drifted = go.Bar(
        name="median under drift (in the catalog)",
        x=labels,
        y=[m["median_ms"] for _, m in rows],
        marker={"color": "#d62728", "pattern": {"shape": "x"}, "line": {"color": "#d62728", "width": 2}},
        text=[_slowdown(m) for _, m in rows],
        textposition="outside",
        hovertemplate="%{x}: median under drift %{y:.4f} ms, %{text}<extra></extra>",
    )
    layout = base_layout(
        title, barmode="group", yaxis={"title": {"text": "ms"}}, xaxis={"title": {"text": "drifted graph shape"}}
    )
    return go.Figure([undisturbed, drifted], layout)


def figures(job: JobData) -> list[Figure]:
    title = "Graph durations as measured (median, p10-p90; hatched red: drifted, with the slowdown achieved)"
    boots = boot_measurements(job)
    out = [Figure("shapes", "Graph durations", shapes_figure(boots, title))]
    drift = drift_figure(boots, job.params) if job.result is not None else None
    if drift is not None:
        out.append(Figure("drift", "Drift achieved", drift))
    return out


def tables(job: JobData) -> dict[str, Table]:
    rows = [
        {"boot": b, **{k: v for k, v in m.items() if k not in ("type", "seq", "ts", "boot", "shape")}}
        for b, ms in enumerate(boot_measurements(job))
        for m in ms
    ]
    spread = [
        {
            "prefill": r["prefill"],
            "decode": r["decode"],
            "max_over_min": r["max_over_min"],
            **{f"boot_{i}_ms": v for i, v in enumerate(r["medians_ms"])},
        }
        for r in (job.result_as(CaptureResult).get("boot_spread", []) if job.result else [])
    ]
    return {"measurements": rows, **({"boot_spread": spread} if spread else {})}


VIEWS = KindViews(
    figures,
    event_types=("measurement",),
    growth=(Growth("measurement", "shapes", x="shape", y="median_ms", trace_field="boot"),),
    tables=tables,
)
