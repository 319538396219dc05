"""fuzz: stalls and broken invariants per policy, and each minimal counterexample drawn as its
launches up to the failure, with a marker where the plan stalled."""

from __future__ import annotations

import plotly.graph_objects as go

from .contract import Figure, JobData, KindViews, Table, base_layout, empty
from .palette import policy_colour
from .timeline import TimelineRow, chunk_timeline


def figures(job: JobData) -> list[Figure]:
    result = job.result
    if not result:
        return [empty("failures", "Failures per policy", "the fuzzer reports when it finishes")]
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
        example = report[name]["counterexample"]
        if example is None:
            continue
        failure = example["failure"]
        row = f"{name} (case {report[name]['first_failing_case']})"
        request = example["input"]["request"]
        if failure["kind"] == "stalled":
            marker = (row, failure["position"], f"stall at {failure['position']}")
        else:
            marker = (row, request["prompt_tokens"], failure["message"][:60])
        title = f"Minimal counterexample, {name}: {request['prompt_tokens']} tokens"
        fig = chunk_timeline(
            [TimelineRow(row, example.get("launches", []))],
            title=title,
            axis="tokens",
            marker=marker,
            span=request["prompt_tokens"],
        )
        fig.update_traces(selector={"type": "scatter"}, marker_color=policy_colour(name))
        out.append(Figure(f"counterexample-{name}", title, fig))
    if len(out) == 1:
        out.append(
            empty(
                "counterexample", "Counterexamples", "no counterexample: every plan finished; try more cases or rule-v1"
            )
        )
    return out


def tables(job: JobData) -> dict[str, Table]:
    report = (job.result or {}).get("policies", {})
    return {
        "policies": [
            {
                "policy": name,
                "plans": e["plans"],
                "stalls": e["stalls"],
                "violations": e["violations"],
                "first_failing_case": e["first_failing_case"],
            }
            for name, e in report.items()
        ]
    }


VIEWS = KindViews(figures, tables=tables)
