"""capture: each graph shape's median duration with its p10-p90, a trace per boot (boots of one
recipe overlaid), drifted shapes hatched. While the job runs, measurements grow the figure."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from gpu_runner.events import shape_label

from .contract import Figure, Growth, JobData, KindViews, Table, base_layout

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
        boots = job.result.get("boots") or [job.result]
        return [b["measurements"] for b in boots]
    count = int(job.params.get("boots", 1))
    streamed: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    for event in job.events_of("measurement"):
        if 0 <= event.get("boot", 0) < count:
            streamed[event.get("boot", 0)].append(event)
    return streamed


def shapes_figure(boots: list[list[dict[str, Any]]], title: str) -> go.Figure:
    fig = go.Figure(layout=base_layout(title, barmode="group"))
    for index, rows in enumerate(boots):
        fig.add_bar(
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
            customdata=[["drifted (timed under load)" if m.get("drifted") else "", m["samples"]] for m in rows],
            hovertemplate="%{x}: median %{y:.4f} ms, %{customdata[1]} samples %{customdata[0]}<extra></extra>",
        )
    fig.update_yaxes(title_text="ms", type="log")
    fig.update_xaxes(title_text="graph shape")
    return fig


def figures(job: JobData) -> list[Figure]:
    title = "Graph durations as measured (median, p10-p90; hatched red: drifted)"
    return [Figure("shapes", "Graph durations", shapes_figure(boot_measurements(job), title))]


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
        for r in (job.result or {}).get("boot_spread", [])
    ]
    return {"measurements": rows, **({"boot_spread": spread} if spread else {})}


VIEWS = KindViews(
    figures,
    event_types=("measurement",),
    growth=(Growth("measurement", "shapes", x="shape", y="median_ms", trace_field="boot"),),
    tables=tables,
)
