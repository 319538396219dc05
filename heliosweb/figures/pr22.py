"""pr22: the pull request's four arms, before (cost) and after (rule)."""

from __future__ import annotations

from typing import cast

import plotly.graph_objects as go

from scheduler_core.analyses.pr22 import Pr22Result
from scheduler_core.events import Arm
from scheduler_core.policies import PR22_POLICIES

from .contract import Figure, JobData, KindViews, Span, Table, base_layout, empty
from .palette import policy_colour
from .timeline import TimelineRow, chunk_timeline, launch_spans


def arms(job: JobData) -> list[Arm]:
    """The finished result's arms, or those announced so far by `arm_result` events (each an arm)."""
    if job.result is not None:
        return list(job.result_as(Pr22Result).get("arms", []))
    return cast(list[Arm], job.events_of("arm_result"))


def figures(job: JobData) -> list[Figure]:
    rows = arms(job)
    if not rows:
        return [empty("ttft", "TTFT per arm", "no arm planned yet: the figures appear as the arms finish")]
    labels = [f"{a['arm']} {a['catalog']}" for a in rows]
    bars = go.Figure(layout=base_layout("TTFT per arm: cost (before) vs rule (after)", barmode="group"))
    for policy in PR22_POLICIES:
        bars.add_trace(
            go.Bar(
                name=f"{policy} ({'before' if policy == 'cost' else 'after'})",
                x=labels,
                y=[a[policy]["ttft_ms"] for a in rows],
                text=[f"{a[policy]['launches']} / {a[policy]['ttft_ms']:.2f}" for a in rows],
                marker_color=policy_colour(policy),
                hovertemplate="%{x}: %{y:.3f} ms (launches / ms: %{text})<extra></extra>",
            )
        )
    bars.update_yaxes(title_text="TTFT (ms)")
    out = [Figure("ttft", "TTFT per arm", bars)]
    for arm in dict.fromkeys(a["arm"] for a in rows):
        timeline_rows = [
            TimelineRow(f"{a['catalog']} · {policy}", a[policy].get("chunks", []))
            for a in rows
            if a["arm"] == arm
            for policy in PR22_POLICIES
        ]
        tokens = next(a["prompt_tokens"] for a in rows if a["arm"] == arm)
        title = f"Chunk timeline, {arm} arm ({tokens} tokens)"
        out.append(Figure(f"timeline-{arm}", title, chunk_timeline(timeline_rows, title=title)))
    return out


def tables(job: JobData) -> dict[str, Table]:
    return {
        "arms": [
            {
                "arm": a["arm"],
                "prompt_tokens": a["prompt_tokens"],
                "catalog": a["catalog"],
                **{f"{p}_{k}": a[p][k] for p in PR22_POLICIES for k in ("launches", "ttft_ms", "padded_tokens")},
                "delta_ms": a["delta_ms"],
            }
            for a in arms(job)
        ]
    }


def spans(job: JobData) -> list[Span]:
    return [
        span
        for a in arms(job)
        for policy in PR22_POLICIES
        for span in launch_spans(
            f"{policy} · {a['catalog']}",
            f"{a['arm']} ({a['prompt_tokens']} tokens)",
            a[policy].get("chunks", []),
            "true_ms",
            "true_ms",
        )
    ]


VIEWS = KindViews(figures, event_types=("arm_result",), tables=tables, spans=spans)
