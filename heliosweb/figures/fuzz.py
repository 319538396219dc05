"""fuzz: stalls and broken invariants per policy, and each minimal counterexample drawn as its
input (the prompt with its atomic spans and message boundaries, the catalog's graphs) and its
launches up to the failure, with a marker where the plan stalled."""

from __future__ import annotations

import plotly.graph_objects as go

from scheduler_core.analyses.fuzz import FuzzResult

from .contract import Figure, JobData, Json, KindViews, Table, base_layout, empty
from .palette import capacity_colour, policy_colour
from .timeline import TimelineRow, chunk_timeline


def figures(job: JobData) -> list[Figure]:
    if not job.result:
        return [empty("failures", "Failures per policy", "the fuzzer reports when it finishes")]
    result = job.result_as(FuzzResult)
    report = result["policies"]
    names = list(report)
    counts = go.Figure(layout=base_layout(f"Failures over {result['cases']} random cases", barmode="group"))
    for what in ("stalls", "violations"):
        counts.add_bar(
            name=what, x=names, y=[report[n][what] for n in names], marker_color=None if what == "stalls" else "#888"
        )
    counts.update_yaxes(title_text="plans", rangemode="tozero")
    out = [Figure("failures", "Failures per policy", counts)]
    for name in names:
        example, case = report[name]["counterexample"], report[name]["first_failing_case"]
        if example is not None and case is not None:  # set together, at the first failing case
            out.append(counterexample(name, case, example))
    if len(out) == 1:
        out.append(
            empty(
                "counterexample", "Counterexamples", "no counterexample: every plan finished; try more cases or rule-v1"
            )
        )
    return out


def counterexample(name: str, case: int, example: Json) -> Figure:
    """The shrunk input and what the plan did with it, on the prompt's token axis: the plan's launches
    up to the failure (a marker there), the prompt (its atomic spans dark, its message boundaries
    ticked) and, for a stall, how far each of the catalog's prefill graphs would reach from the
    stall: the picture says why no launch fits."""
    failure = example["failure"]
    request = example["input"]["request"]
    n = request["prompt_tokens"]
    graphs = sorted({g["prefill"] for g in example["input"]["catalog"] if g["decode"] == 0 and g["prefill"] > 0})
    plan_row = "plan"  # short row labels: a phone's plot keeps its width
    launches = example.get("launches", [])
    if failure["kind"] == "stalled":
        at, what = failure["position"], f"stall at {failure['position']}"
    else:
        at, what = n, failure["message"][:60]
    title = f"Minimal counterexample, {name} (case {case}): {n} tokens, {what}"
    marker = (plan_row, at, what)
    fig = chunk_timeline([TimelineRow(plan_row, launches)], title=title, axis="tokens", marker=marker, span=n)
    # Beside the marker, drawn past the plot's edge: at the top row's edge its text was cut off.
    fig.update_traces(
        selector={"type": "scatter"}, marker_color=policy_colour(name), textposition="middle right", cliponaxis=False
    )
    prompt_row = "prompt"
    spans = request["atomic_spans"]
    fig.add_trace(go.Bar(
        name="prompt tokens", orientation="h", y=[prompt_row], x=[n], base=[0], marker={"color": "#d7dde4"},
        hovertemplate=f"prompt: {n} tokens<extra></extra>",
    ))  # fmt: skip
    if spans:
        fig.add_trace(go.Bar(
            name="atomic span (not split)", orientation="h", y=[prompt_row] * len(spans),
            x=[e - s for s, e in spans], base=[s for s, _ in spans], customdata=[[s, e] for s, e in spans],
            marker={"color": "#5f5f5f", "pattern": {"shape": "x", "fgcolor": "white", "fillmode": "overlay"}},
            hovertemplate="atomic span [%{customdata[0]}, %{customdata[1]})<extra></extra>",
        ))  # fmt: skip
    if request["message_boundaries"]:
        bounds = request["message_boundaries"]
        fig.add_trace(go.Scatter(
            name="message boundary", mode="markers", y=[prompt_row] * len(bounds), x=bounds,
            marker={"symbol": "line-ns-open", "size": 18, "color": "#333333"},
            hovertemplate="message boundary at %{x}<extra></extra>",
        ))  # fmt: skip
    graph_rows = [f"graph {g}" for g in graphs] if failure["kind"] == "stalled" else []
    for g, row in zip(graphs, graph_rows, strict=False):
        fig.add_trace(go.Bar(
            name=f"{row} from {at}", orientation="h", y=[row], x=[g], base=[at], showlegend=False,
            marker={"color": capacity_colour(g), "opacity": 0.6},
            hovertemplate=f"graph {g}: tokens [{at}, {at + g})<extra></extra>",
        ))  # fmt: skip
    rows = [plan_row, prompt_row, *graph_rows]
    fig.update_layout(
        height=140 + 46 * len(rows),
        yaxis={"categoryarray": rows[::-1]},
        xaxis={"range": [0, max([n, *(at + g for g in graphs if graph_rows)])]},
    )
    spans_text = ", ".join(f"[{s}, {e})" for s, e in spans) or "none"
    summary = (
        f"{name} fails case {case}, shrunk in {example['shrink_steps']} steps to a {n}-token prompt "
        f"(atomic spans {spans_text}; {len(request['message_boundaries'])} message boundaries) and a catalog of "
        f"prefill graphs {', '.join(map(str, graphs)) or 'none'}: the plan makes {len(launches)} launches, then {what}."
    )
    return Figure(f"counterexample-{name}", title, fig, summary)


def tables(job: JobData) -> dict[str, Table]:
    report = job.result_as(FuzzResult)["policies"] if job.result else {}
    return {
        "policies": [
            {"policy": name, **{k: e[k] for k in ("plans", "stalls", "violations", "first_failing_case")}}
            for name, e in report.items()
        ]
    }


VIEWS = KindViews(figures, tables=tables)
