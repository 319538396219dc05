"""vllm-check: a real vLLM's TTFT beside the simulator's for the same requests.

Two figures: each request's simulated TTFT against its real one (on the diagonal the simulator is
exact), and TTFT p50/p90/p99 real and simulated with each percentile's error; their text states
the figures and the run's conditions. The per-request table is the CSV export."""

from __future__ import annotations

import plotly.graph_objects as go

from vllm_loop.check import CheckResult
from vllm_loop.compare import QUANTILES

from .contract import Figure, JobData, KindViews, Table, base_layout, empty

REAL, SIM = "#4e79a7", "#f28e2b"


def conditions_text(result: CheckResult) -> str:
    c = result["conditions"]
    return (
        f"{c['vllm']} on {c['device']} ({c['cpus']} CPUs, load average {c['load_average_before'][0]} "
        f"-> {c['load_average_after'][0]}), model {c['model_shape']}, chunk budget {c['max_num_batched_tokens']}"
    )


def summary(result: CheckResult) -> str:
    c = result["comparison"]
    errors = ", ".join(
        f"{q} {c['real_ttft_ms'][q] or 0:.1f} ms real, {c['sim_ttft_ms'][q] or 0:.1f} ms simulated "
        f"({c['percentile_error_pct'][q] or 0:+.1f} %)"
        for q in QUANTILES
    )
    r = c["request_error_pct"]
    return (
        f"{c['requests']} requests ({c['failed']} failed) served on {result['engine']} and simulated "
        f"({result['sim_policy']}). TTFT {errors}. Per-request absolute error p50 {r['p50'] or 0:.1f} %, "
        f"p99 {r['p99'] or 0:.1f} %. {conditions_text(result)}."
    )


def scatter(result: CheckResult) -> Figure:
    rows = result["comparison"]["per_request"]
    top = max([r["real_ttft_ms"] for r in rows] + [r["sim_ttft_ms"] for r in rows] + [1.0])
    fig = go.Figure(layout=base_layout("Each request: simulated TTFT against real TTFT (ms)"))
    fig.add_scatter(name="exact", x=[0, top], y=[0, top], mode="lines", line={"color": "#9ca3af", "dash": "dot"})
    fig.add_scatter(
        name="request",
        x=[r["real_ttft_ms"] for r in rows],
        y=[r["sim_ttft_ms"] for r in rows],
        mode="markers",
        marker={"color": REAL, "size": 6},
        text=[f"request {r['id']}: {r['prompt_tokens']} prompt tokens" for r in rows],
    )
    fig.update_xaxes(title_text="real TTFT (ms)")
    fig.update_yaxes(title_text="simulated TTFT (ms)")
    r = result["comparison"]["request_error_pct"]
    under = sum(1 for row in rows if row["sim_ttft_ms"] < row["real_ttft_ms"])
    text = (
        f"{len(rows)} requests, each a point: real TTFT across, simulated up; {under} below the diagonal "
        f"(simulated faster). Each request's own absolute error: p50 {r['p50'] or 0:.1f} %, p90 {r['p90'] or 0:.1f} %, "
        f"p99 {r['p99'] or 0:.1f} %."
    )
    return Figure("requests", "Simulated against real, per request", fig, summary=text)


def percentiles(result: CheckResult) -> Figure:
    c = result["comparison"]
    labels = [f"{q} ({c['percentile_error_pct'][q] or 0:+.1f} %)" for q in QUANTILES]
    fig = go.Figure(
        layout=base_layout(
            "TTFT percentiles: real vLLM and simulator", barmode="group", yaxis={"title": {"text": "ms"}}
        )
    )
    fig.add_bar(name="real", x=labels, y=[c["real_ttft_ms"][q] for q in QUANTILES], marker={"color": REAL})
    fig.add_bar(name="simulated", x=labels, y=[c["sim_ttft_ms"][q] for q in QUANTILES], marker={"color": SIM})
    return Figure("percentiles", "TTFT percentiles and their error", fig, summary=summary(result))


def figures(job: JobData) -> list[Figure]:
    if job.result is None:
        return [empty("requests", "Simulated against real", "no result yet: vLLM starts, is measured, then serves")]
    result = job.result_as(CheckResult)
    if not result["comparison"]["requests"]:
        return [empty("requests", "Simulated against real", "vLLM answered no request: see the job's error")]
    return [percentiles(result), scatter(result)]


def tables(job: JobData) -> dict[str, Table]:
    if job.result is None:
        return {}
    rows = job.result_as(CheckResult)["comparison"]["per_request"]
    return {"requests": [{k: v for k, v in r.items() if k != "sim_chunks"} for r in rows]}


VIEWS = KindViews(figures, tables=tables)
