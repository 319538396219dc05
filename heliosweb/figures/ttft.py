"""ttft: real TTFT measured on the model next to what the catalog predicted, per prompt and
policy (the error in % labelled), and each plan's launches as measured vs as predicted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from gpu_runner.results import TtftResult

from .contract import Figure, JobData, KindViews, Span, Table, base_layout, empty
from .palette import policy_colour
from .timeline import TimelineRow, chunk_timeline, launch_spans


def figures(job: JobData) -> list[Figure]:
    if not job.result:
        return [empty("ttft", "Measured vs predicted TTFT", "the plans are executed after the boot is captured")]
    arms = job.result_as(TtftResult)["arms"]
    x = [f"{a['prompt_tokens']} · {a['policy']}" for a in arms]
    fig = go.Figure(layout=base_layout("TTFT: measured on the model vs the catalog's prediction", barmode="group"))
    fig.add_bar(
        name="measured TTFT",
        x=x,
        y=[a["ttft_ms"] for a in arms],
        marker_color=[policy_colour(a["policy"]) for a in arms],
        text=[
            f"{100 * (a['ttft_ms'] - a['predicted_ms']) / a['predicted_ms']:+.1f}%" if a["predicted_ms"] else ""
            for a in arms
        ],
        textposition="outside",
        hovertemplate="%{x}: measured %{y:.3f} ms (%{text} vs predicted)<extra></extra>",
    )
    fig.add_bar(name="predicted from the catalog", x=x, y=[a["predicted_ms"] for a in arms], marker_color="#9aa5b1")
    if any(abs(a["table_ms"] - a["predicted_ms"]) > 1e-9 for a in arms):
        fig.add_bar(
            name="the same launches at undisturbed medians",
            x=x,
            y=[a["table_ms"] for a in arms],
            marker_color="#c5cbd3",
        )
    fig.update_yaxes(title_text="ms")
    out = [Figure("ttft", "Measured vs predicted TTFT", fig)]
    for n in dict.fromkeys(a["prompt_tokens"] for a in arms):
        rows = []
        for a in (a for a in arms if a["prompt_tokens"] == n):
            rows.append(TimelineRow(f"{a['policy']} measured", a["launches"], "ms", "measured"))
            rows.append(TimelineRow(f"{a['policy']} predicted", a["launches"], "predicted_ms", "predicted"))
        title = f"Chunk timeline, {n} tokens: measured launches above predicted ones"
        out.append(Figure(f"timeline-{n}", title, chunk_timeline(rows, title=title)))
    return out


def tables(job: JobData) -> dict[str, Table]:
    arms: Sequence[Mapping[str, Any]] = job.result_as(TtftResult)["arms"] if job.result else []
    keys = (
        "prompt_tokens",
        "policy",
        "launch_count",
        "padded_tokens",
        "ttft_ms",
        "predicted_ms",
        "table_ms",
        "launch_sum_ms",
    )
    return {
        "arms": [{k: a[k] for k in keys} for a in arms],
        "launches": [
            {"prompt_tokens": a["prompt_tokens"], "policy": a["policy"], **l} for a in arms for l in a["launches"]
        ],
    }


def spans(job: JobData) -> list[Span]:
    arms = job.result_as(TtftResult)["arms"] if job.result else []
    measured = [(f"{a['policy']} · measured", f"{a['prompt_tokens']} tokens", a["launches"]) for a in arms]
    return [
        span
        for process, thread, launches in measured
        for span in launch_spans(process, thread, launches, "ms", "measured_ms")
    ]


VIEWS = KindViews(figures, tables=tables, spans=spans)
