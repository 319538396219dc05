"""replay: what each policy would have done with the traffic an engine served, beside what it served.

The comparison draws TTFT p50 and p99 of each replayed policy and of each policy the engine served
under (its own reports), p99 hatched; its text alternative states every figure and how faithfully the replay
repeats the engine's launches. The TTFT CDF and the launches/padding panels are simulate's (the
same per-policy summaries), and so is the after - before CDF of the pair compared (each request
paired with itself)."""

from __future__ import annotations

import plotly.graph_objects as go

from scheduler_core.analyses.replay import ReplayResult, comparison_rows

from .contract import Figure, JobData, KindViews, Table, base_layout, empty
from .palette import policy_colour
from .simulate import delta_rows, deltas_figures, launches_padding, load_summary, pair_deltas, ttft_cdf

SERVED_COLOUR = "#6b7280"


def comparison(result: ReplayResult) -> Figure:
    table = comparison_rows(result)
    names = [r["policy"] for r in table]
    colours = [SERVED_COLOUR if n.startswith("served ") else policy_colour(n) for n in names]
    traces = [
        {
            "type": "bar",
            "name": f"TTFT {q}",
            "x": names,
            "y": [r[f"ttft_{q}_ms"] for r in table],
            "marker": {"color": colours, "pattern": {"shape": "" if q == "p50" else "/"}},
        }
        for q in ("p50", "p99")
    ]
    layout = base_layout(
        "TTFT p50 and p99: each policy replayed, and as served", barmode="group", yaxis={"title": {"text": "TTFT (ms)"}}
    )
    return Figure("comparison", "Replayed and served", go.Figure(traces, layout), summary=summary(result))


def summary(result: ReplayResult) -> str:
    """Every row's figures in words, and the reproduction of each policy the engine ran."""
    parts = [
        f"{r['policy']}: TTFT p50 {r['ttft_p50_ms'] or 0:.1f} ms, p99 {r['ttft_p99_ms'] or 0:.1f} ms, "
        f"{r['prefill_launches']} prefill launches, {r['padded_prefill_tokens']} padded tokens"
        for r in comparison_rows(result)
    ]
    parts += [
        f"replayed {r['policy']} repeats the engine's launches for {r['same_launches']} of {r['requests']} requests"
        for r in result["reproduction"]
    ]
    return f"{result['requests']} requests replayed ({result['randomness']}). " + "; ".join(parts) + "."


def figures(job: JobData) -> list[Figure]:
    if not job.result:
        return [empty("comparison", "Replayed and served", "the comparison is drawn when the replay finishes")]
    result = job.result_as(ReplayResult)
    policies = result["policies"]
    out = [comparison(result), Figure("ttft-cdf", "TTFT CDF", ttft_cdf(policies), load_summary(policies))]
    out += deltas_figures(pair_deltas(job))
    out.append(Figure("launches-padding", "Launches and padding", launches_padding(result["policies"])))
    return out


def tables(job: JobData) -> dict[str, Table]:
    if not job.result:
        return {}
    result = job.result_as(ReplayResult)
    deltas = pair_deltas(job)
    return {
        "comparison": comparison_rows(result),
        "deltas": delta_rows(deltas),
        "reproduction": result["reproduction"],
        "worst": (deltas or {}).get("worst", []),
    }


VIEWS = KindViews(figures, tables=tables)
