"""sweep: TTFT, the delta of the pair compared (the reader's pick, by default its first two policies), launches and padding against prompt length; a click on a
point opens that prompt's chunk timelines on the explain page."""

from __future__ import annotations

from plotly.subplots import make_subplots

from scheduler_core.analyses.sweep import SweepResult, compared

from .contract import LOG_AXIS, Figure, JobData, KindViews, Table, base_layout, empty
from .palette import policy_colour

DASH = {"clean": "solid", "drift": "dot", "boot": "dash"}


def _explain_link(job: JobData, catalog: str) -> str:
    return f"/explain?job={job.id}&catalog={catalog}&prompt_tokens={{x}}"


def figures(job: JobData) -> list[Figure]:
    if not job.result:
        return [empty("ttft", "TTFT vs prompt length", "the sweep draws its curves when it finishes")]
    result = job.result_as(SweepResult)
    x = result["prompt_tokens"]
    pair = job.compared()
    label = pair.label if pair else "after - before"
    deltas = compared(x, result["series"], pair)[0]
    ttft = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.58, 0.42], vertical_spacing=0.06)
    counts = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    for catalog, by_policy in result["series"].items():
        for policy, values in by_policy.items():
            style = {"color": policy_colour(policy), "dash": DASH.get(catalog, "solid")}
            meta = {"link": _explain_link(job, catalog)}
            name = f"{catalog} {policy}"
            ttft.add_scatter(
                x=x,
                y=values["ttft_ms"],
                name=name,
                mode="lines+markers",
                marker_size=4,
                line=style,
                meta=meta,
                row=1,
                col=1,
            )
            counts.add_scatter(
                x=x, y=values["launches"], name=f"{name} launches", mode="lines", line=style, meta=meta, row=1, col=1
            )
            counts.add_scatter(
                x=x,
                y=values["padded_tokens"],
                name=f"{name} padded tokens",
                mode="lines",
                line=style,
                meta=meta,
                row=2,
                col=1,
            )
        if catalog in deltas:
            ttft.add_scatter(
                x=x,
                y=deltas[catalog],
                name=f"{catalog}: {label}",
                mode="lines",
                line={"color": "#444", "dash": DASH.get(catalog, "solid")},
                row=2,
                col=1,
            )
    axis = LOG_AXIS if result.get("spacing") == "log" else {"type": "linear"}
    ttft.update_layout(
        base_layout(f"TTFT vs prompt length (top), {label} (bottom); click a point to explain it", height=560)
    )
    ttft.update_xaxes(**axis)
    ttft.update_xaxes(title_text="prompt tokens", row=2, col=1)
    ttft.update_yaxes(title_text="TTFT (ms)", **LOG_AXIS, row=1, col=1)
    ttft.update_yaxes(title_text=f"{label} (ms)", zeroline=True, row=2, col=1)
    counts.update_layout(base_layout("Launches (top) and padded tokens (bottom) vs prompt length", height=520))
    counts.update_xaxes(**axis)
    counts.update_xaxes(title_text="prompt tokens", row=2, col=1)
    counts.update_yaxes(title_text="launches", row=1, col=1)
    counts.update_yaxes(title_text="padded tokens", row=2, col=1)
    return [
        Figure("ttft", f"TTFT and {label}", ttft),
        Figure("launches-padding", "Launches and padding", counts),
    ]


def tables(job: JobData) -> dict[str, Table]:
    if not job.result:
        return {"series": [], "summary": []}
    result = job.result_as(SweepResult)
    series = [
        {
            "catalog": catalog,
            "policy": policy,
            "prompt_tokens": n,
            "ttft_ms": values["ttft_ms"][i],
            "launches": values["launches"][i],
            "padded_tokens": values["padded_tokens"][i],
        }
        for catalog, by_policy in result["series"].items()
        for policy, values in by_policy.items()
        for i, n in enumerate(result["prompt_tokens"])
    ]
    pair = job.compared()
    sides = pair.to_dict() if pair else {}
    by_catalog = compared(result["prompt_tokens"], result["series"], pair)[1]
    summary = [{"catalog": c, **sides, **s} for c, s in by_catalog.items()]
    return {"series": series, "summary": summary}


VIEWS = KindViews(figures, tables=tables)
