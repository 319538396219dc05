"""boots: does a policy's plan follow measurement noise? Distinct launch sequences per prompt, and
the TTFT each policy's plans span across the boots (min .. max, mean marked)."""

from __future__ import annotations

import plotly.graph_objects as go

from scheduler_core.analyses.boots import BootsResult

from .contract import Figure, JobData, KindViews, Table, base_layout, empty
from .palette import policy_colour


def figures(job: JobData) -> list[Figure]:
    if not job.result:
        return [empty("distinct", "Distinct launch sequences", "the boots are compared when the job finishes")]
    result = job.result_as(BootsResult)
    prompts = result["prompts"]
    x = [f"{row['prompt_tokens']} tokens" for row in prompts]
    boots = result["boots"]
    distinct = go.Figure(
        layout=base_layout(f"Distinct launch sequences over {boots} boots (1 = deterministic)", barmode="group")
    )
    spread = go.Figure(
        layout=base_layout("TTFT across boots, above each prompt's fastest plan: min .. max, mean marked")
    )
    # Prompts differ by orders of magnitude; measured from each prompt's best plan, every spread is legible.
    floor = [min(row[p]["ttft_ms"]["min"] for p in result["overall"]) for row in prompts]
    for policy in result["overall"]:
        colour = policy_colour(policy)
        distinct.add_bar(
            name=policy, x=x, y=[row[policy]["distinct_sequences"] for row in prompts], marker_color=colour
        )
        ttft = [row[policy]["ttft_ms"] for row in prompts]
        spread.add_scatter(
            name=policy,
            x=x,
            y=[t["mean"] - f for t, f in zip(ttft, floor)],
            mode="markers",
            marker={"color": colour, "size": 10, "symbol": "line-ew-open", "line": {"width": 3}},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [t["max"] - t["mean"] for t in ttft],
                "arrayminus": [t["mean"] - t["min"] for t in ttft],
                "width": 12,
                "thickness": 3,
            },
            customdata=[[t["min"], t["max"], t["mean"], t["spread"]] for t in ttft],
            hovertemplate="%{x} "
            + policy
            + ": %{customdata[0]:.3f} .. %{customdata[1]:.3f} ms, mean %{customdata[2]:.3f} (spread %{customdata[3]:.3f})<extra></extra>",
        )
    distinct.update_yaxes(title_text="distinct sequences", rangemode="tozero")
    spread.update_yaxes(title_text="ms above the prompt's fastest plan", rangemode="tozero")
    spread.update_layout(scattermode="group")
    return [
        Figure("distinct", "Distinct launch sequences", distinct),
        Figure("spread", "TTFT spread across boots", spread),
    ]


def tables(job: JobData) -> dict[str, Table]:
    if not job.result:
        return {"prompts": []}
    result = job.result_as(BootsResult)
    rows = [
        {
            "prompt_tokens": row["prompt_tokens"],
            "policy": policy,
            "distinct_sequences": row[policy]["distinct_sequences"],
            "launches_min": row[policy]["launches"]["min"],
            "launches_max": row[policy]["launches"]["max"],
            **{f"ttft_{k}_ms": v for k, v in row[policy]["ttft_ms"].items()},
        }
        for row in result["prompts"]
        for policy in result["overall"]
    ]
    return {"prompts": rows}


VIEWS = KindViews(figures, tables=tables)
