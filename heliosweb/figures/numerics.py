"""numerics: does chunking change the first token's logits? Max absolute and relative difference
per comparison on a log axis with the tolerance drawn, and the two chunkings compared."""

from __future__ import annotations

import plotly.graph_objects as go

from gpu_runner.results import NumericsResult
from scheduler_core.measured import LogitsComparison

from .contract import Figure, JobData, KindViews, Table, base_layout, empty
from .timeline import TimelineRow, chunk_timeline


def comparisons(result: NumericsResult) -> list[tuple[str, LogitsComparison]]:
    out = [(f"{p} vs one-shot", c) for p, c in result["vs_one_shot"].items()]
    out.append(("cost vs rule", result["cost_vs_rule"]))
    out += [(f"{p} twice", c) for p, c in result["same_chunking_twice"].items()]
    return out


def figures(job: JobData) -> list[Figure]:
    if not job.result:
        return [empty("differences", "Logit differences", "the comparison is drawn when the job finishes")]
    result = job.result_as(NumericsResult)
    rows = comparisons(result)
    names = [n for n, _ in rows]
    fig = go.Figure(
        layout=base_layout("Max logit difference per comparison (log; identical runs have no bar)", barmode="group")
    )
    for key, label in (("max_abs_diff", "max absolute"), ("max_rel_diff", "max relative")):
        values = [c.get(key) for _, c in rows]
        fig.add_bar(
            name=label,
            x=names,
            y=[v if v else None for v in values],
            text=["identical" if v == 0 else f"{v:.2e}" if v is not None else "" for v in values],
            textposition="outside",
        )
    tolerance = result.get("tolerance")
    if tolerance:
        fig.add_scatter(
            name=f"tolerance (relative, {tolerance['dtype']})",
            x=names,
            y=[tolerance["max_rel_diff"]] * len(names),
            mode="lines",
            line={"color": "#d62728", "dash": "dash"},
        )
    for name, c in rows:
        if c.get("bitwise_identical"):
            fig.add_annotation(x=name, y=0.04, yref="paper", text="bitwise identical", showarrow=False)
    fig.update_yaxes(type="log", title_text="difference")
    chunkings = result["chunkings"]
    timeline_rows = [
        TimelineRow(
            policy,
            [
                {"graph": g, "start": s, "end": e, "chooser": "—", "predicted_ms": None}
                for g, (s, e) in zip(c["graphs"], c["chunks"])
            ],
        )
        for policy, c in chunkings.items()
    ]
    title = f"The chunkings compared ({result['prompt_tokens']} tokens)"
    return [
        Figure("differences", "Logit differences", fig),
        Figure("chunkings", "Chunkings", chunk_timeline(timeline_rows, title=title, axis="tokens")),
    ]


def tables(job: JobData) -> dict[str, Table]:
    if not job.result:
        return {"comparisons": []}
    return {
        "comparisons": [
            {"comparison": name, **{k: v for k, v in c.items() if k != "argmax"}}
            for name, c in comparisons(job.result_as(NumericsResult))
        ]
    }


VIEWS = KindViews(figures, tables=tables)
