"""vllm-check: a real vLLM's TTFT beside the simulator's for the same requests.

Two figures, each drawing every policy served: each request's simulated TTFT against its real one
(on the diagonal the simulator is exact), and TTFT p50/p90/p99 real and simulated with each
percentile's error, the first policy's window served again beside them (the engine against itself:
the noise no simulator's error can be told from), both as the clients saw TTFT (the per-request
rows are the client's); their
text states the figures, the engine's own TTFT percentiles beside, and the run's conditions. The per-request table
(every policy's requests) is the CSV export."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from vllm_loop.check import CheckResult, policy_runs
from vllm_loop.compare import QUANTILES, signed

from .contract import Figure, JobData, KindViews, Table, base_layout, empty

# per policy served, in order: (real, simulated), a dark and a light shade of one hue
COLOURS = (("#4e79a7", "#a0cbe8"), ("#f28e2b", "#ffbe7d"), ("#59a14f", "#8cd17d"), ("#b6992d", "#f1ce63"))


def colours(i: int) -> tuple[str, str]:
    return COLOURS[i % len(COLOURS)]


def conditions_text(result: CheckResult) -> str:
    c = result["conditions"]
    return (
        f"{c['vllm']} on {c['device']} ({c['cpus']} CPUs, load average {c['load_average_before'][0]} "
        f"-> {c['load_average_after'][0]}), model {c['model_shape']}, chunk budget {c['max_num_batched_tokens']}"
    )


def percentile_errors(c: dict[str, Any]) -> str:
    return ", ".join(
        f"{q} {c['real_ttft_ms'][q] or 0:.1f} ms real, {c['sim_ttft_ms'][q] or 0:.1f} ms simulated "
        f"({c['percentile_error_pct'][q] or 0:+.1f} %)"
        for q in QUANTILES
    )


def policy_summary(policy: str, run: dict[str, Any]) -> str:
    c = run["comparison"]
    r = c["request_error_pct"]
    engine = run.get("engine_comparison")  # absent from results stored before it
    return (
        f"Under {policy}: {c['requests']} requests ({c['failed']} failed), TTFT as the clients saw it {percentile_errors(c)}; "
        f"per-request absolute error p50 {r['p50'] or 0:.1f} %, p99 {r['p99'] or 0:.1f} %."
        + ("" if engine is None else f" TTFT as the engine reports it: {percentile_errors(engine)}.")
    )


def repeat_summary(result: CheckResult) -> str:
    """The engine against itself, the floor under any simulator's error (absent before it was kept)."""
    repeat = result.get("repeatability")
    if repeat is None:
        return ""
    moved = [
        f"as the {side} {'saw' if side == 'client' else 'reports'} it {signed(repeat[side]['percentile_diff_pct'])}"
        + ("" if (sim := repeat["sim_error_pct"][side]) is None else f" (the simulator against it: {signed(sim)})")
        for side in ("client", "engine")
        if repeat[side]["requests"]
    ]
    return f" Served again under {repeat['policy']}, the same window's TTFT moved {'; '.join(moved)}."


def summary(result: CheckResult) -> str:
    runs = policy_runs(result)
    per_policy = " ".join(policy_summary(policy, run) for policy, run in runs.items())
    return (
        f"The same window served on {result['engine']} and simulated under {len(runs)} "
        f"polic{'y' if len(runs) == 1 else 'ies'}. {per_policy}{repeat_summary(result)} {conditions_text(result)}."
    )


def scatter(result: CheckResult) -> Figure:
    runs = policy_runs(result)
    rows = {policy: run["comparison"]["per_request"] for policy, run in runs.items()}
    every = [r for policy_rows in rows.values() for r in policy_rows]
    top = max([r["real_ttft_ms"] for r in every] + [r["sim_ttft_ms"] for r in every] + [1.0])
    fig = go.Figure(layout=base_layout("Each request: simulated TTFT against real TTFT as its client saw it (ms)"))
    fig.add_scatter(name="exact", x=[0, top], y=[0, top], mode="lines", line={"color": "#9ca3af", "dash": "dot"})
    texts = []
    for i, (policy, policy_rows) in enumerate(rows.items()):
        fig.add_scatter(
            name=policy,
            x=[r["real_ttft_ms"] for r in policy_rows],
            y=[r["sim_ttft_ms"] for r in policy_rows],
            mode="markers",
            marker={"color": colours(i)[0], "size": 6},
            text=[f"{policy}, request {r['id']}: {r['prompt_tokens']} prompt tokens" for r in policy_rows],
        )
        r = runs[policy]["comparison"]["request_error_pct"]
        under = sum(1 for row in policy_rows if row["sim_ttft_ms"] < row["real_ttft_ms"])
        texts.append(
            f"under {policy}, {len(policy_rows)} requests, {under} below the diagonal (simulated faster), each "
            f"request's own absolute error p50 {r['p50'] or 0:.1f} %, p90 {r['p90'] or 0:.1f} %, p99 {r['p99'] or 0:.1f} %"
        )
    fig.update_xaxes(title_text="real TTFT (ms)")
    fig.update_yaxes(title_text="simulated TTFT (ms)")
    text = f"Each request a point, one colour a policy: real TTFT across, simulated up; {'; '.join(texts)}."
    return Figure("requests", "Simulated against real, per request", fig, summary=text)


def percentiles(result: CheckResult) -> Figure:
    fig = go.Figure(
        layout=base_layout(
            "TTFT percentiles as the clients saw them: real vLLM and simulator",
            barmode="group",
            yaxis={"title": {"text": "ms"}},
        )
    )
    for i, (policy, run) in enumerate(policy_runs(result).items()):
        c = run["comparison"]
        real, sim = colours(i)
        errors = [f"{c['percentile_error_pct'][q] or 0:+.1f} %" for q in QUANTILES]
        fig.add_bar(
            name=f"{policy} real",
            x=list(QUANTILES),
            y=[c["real_ttft_ms"][q] for q in QUANTILES],
            marker={"color": real},
        )
        if (repeat := result.get("repeatability")) and repeat["policy"] == policy:
            again = repeat["client"]
            fig.add_bar(
                name=f"{policy} real, again",
                x=list(QUANTILES),
                y=[again["again_ttft_ms"][q] for q in QUANTILES],
                marker={"color": real, "pattern": {"shape": "/", "fillmode": "overlay", "fgcolor": "#ffffff"}},
                text=[f"{again['percentile_diff_pct'][q] or 0:+.1f} %" for q in QUANTILES],
                textposition="outside",
            )
        fig.add_bar(
            name=f"{policy} simulated",
            x=list(QUANTILES),
            y=[c["sim_ttft_ms"][q] for q in QUANTILES],
            marker={"color": sim},
            text=errors,
            textposition="outside",
        )
    return Figure("percentiles", "TTFT percentiles and their error, per policy", fig, summary=summary(result))


def figures(job: JobData) -> list[Figure]:
    if job.result is None:
        return [empty("requests", "Simulated against real", "no result yet: vLLM starts, is measured, then serves")]
    result = job.result_as(CheckResult)
    if not any(run["comparison"]["requests"] for run in policy_runs(result).values()):
        return [empty("requests", "Simulated against real", "vLLM answered no request: see the job's error")]
    return [percentiles(result), scatter(result)]


def tables(job: JobData) -> dict[str, Table]:
    """Every request of every policy served, its policy first."""
    if job.result is None:
        return {}
    runs = policy_runs(job.result_as(CheckResult))
    return {
        "requests": [
            {"policy": policy, **{k: v for k, v in r.items() if k != "sim_chunks"}}
            for policy, run in runs.items()
            for r in run["comparison"]["per_request"]
        ]
    }


VIEWS = KindViews(figures, tables=tables)
