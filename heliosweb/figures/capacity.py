"""capacity: per policy, overlaid against the request rate: TTFT p50/p99 with the SLO's bound and
95 % intervals, goodput against the offered rate with each policy's capacity marked, SLO attainment,
and the picked pair's after - before TTFT per request as a CDF at each rate. Every curve holds the stepped rates and
the search's; a rate where the run was overloaded is drawn as an x (its TTFT is queueing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from scheduler_core.analyses.capacity import CapacityResult, capacity_text
from scheduler_core.comparison import deltas_of
from scheduler_core.deltas import DIFFERENCE_OF_PERCENTILES, PERCENTILE_OF_DIFFERENCES, capacity_differences, column

from .contract import LOG_AXIS, Figure, JobData, KindViews, Table, base_layout, empty
from .palette import policy_colour


def _errors(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """Asymmetric error bars from each point's 95 % interval (zero-width for a deterministic trace)."""
    return {
        "type": "data",
        "symmetric": False,
        "array": [f["high"] - f["mean"] for f in figures],
        "arrayminus": [f["mean"] - f["low"] for f in figures],
        "thickness": 1.5,
    }


OVERLOADED_NOTE = "x: overloaded (TTFT there is queueing)"


def points_of(policy: dict[str, Any]) -> list[dict[str, Any]]:
    """A policy's stepped and searched points, by rate (results older than the search have none)."""
    return sorted([*policy["points"], *policy.get("search", [])], key=lambda pt: pt["rate_per_s"])


def _curve(points: list[dict[str, Any]], key: str, name: str, line: dict[str, Any]) -> go.Scatter:
    """One policy's figure against the rate: the means with their intervals as error bars, an x
    where the run was overloaded."""
    values = [pt[key] for pt in points]
    symbols = ["x" if pt.get("overloaded") else "circle" for pt in points]
    return go.Scatter(
        x=[pt["rate_per_s"] for pt in points],
        y=[v["mean"] for v in values],
        error_y=_errors(values),
        name=name,
        mode="lines+markers",
        line=line,
        marker={"symbol": symbols, "size": [10 if s == "x" else 6 for s in symbols]},
    )


def _ttft(result: CapacityResult) -> go.Figure:
    traces: list[dict[str, Any]] = []
    for p in result["policies"]:
        colour = policy_colour(p["policy"])
        for key, dash in (("ttft_p99_ms", "solid"), ("ttft_p50_ms", "dot")):
            traces.append(_curve(points_of(p), key, f"{p['policy']} {key[5:8]}", {"color": colour, "dash": dash}))
    bound = result["slo"]["ttft_p99_ms"]
    layout = base_layout(
        f"TTFT vs rate: p99 solid, p50 dotted, SLO {bound:g} ms dashed; {OVERLOADED_NOTE}",
        xaxis={"title": {"text": "requests per second"}, **LOG_AXIS},
        yaxis={"title": {"text": "TTFT (ms)"}, **LOG_AXIS},
        shapes=[_dashed(y=bound)],
    )
    return go.Figure(traces, layout)


def _dashed(*, x: float | None = None, y: float | None = None, colour: str = "#444") -> dict[str, Any]:
    """A dashed line across the plot: upright at `x` (a capacity), else level at `y` (the SLO's bound)."""
    line = {"dash": "dash", "color": colour}
    if x is not None:
        return {"type": "line", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1, "line": line}
    return {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y, "y1": y, "line": line}


def _goodput(result: CapacityResult) -> go.Figure:
    rates = sorted({pt["rate_per_s"] for p in result["policies"] for pt in points_of(p)})
    traces: list[Any] = [
        go.Scatter(x=rates, y=rates, name="offered", mode="lines", line={"color": "#999", "dash": "dot"})
    ]
    shapes = []
    for p in result["policies"]:
        colour = policy_colour(p["policy"])
        cap = p["capacity_per_s"]
        label = "below the lowest rate" if cap is None else f"{cap:g}/s"
        traces.append(_curve(points_of(p), "goodput_per_s", f"{p['policy']} (capacity {label})", {"color": colour}))
        if cap is not None:
            shapes.append(_dashed(x=cap, colour=colour))
    layout = base_layout(
        f"Goodput (requests/s within the SLO); capacity dashed; {OVERLOADED_NOTE}",
        xaxis={"title": {"text": "offered requests per second"}, **LOG_AXIS},
        yaxis={"title": {"text": "goodput (requests/s)"}, "rangemode": "nonnegative"},
        shapes=shapes,
    )
    return go.Figure(traces, layout)


def _attainment(result: CapacityResult) -> go.Figure:
    traces = []
    for p in result["policies"]:
        traces.append(_curve(points_of(p), "attainment", p["policy"], {"color": policy_colour(p["policy"])}))
    layout = base_layout(
        "SLO attainment (TTFT and mean ITL within bounds)",
        xaxis={"title": {"text": "requests per second"}, **LOG_AXIS},
        yaxis={"title": {"text": "attainment"}, "tickformat": ".0%", "range": [0, 1.02]},
    )
    return go.Figure(traces, layout)


def pair_rows(job: JobData) -> list[tuple[float, Mapping[str, Any]]]:
    """(rate, the stored comparison of the pair compared, `JobData.compared`) per stepped rate
    that compared it (`comparison.deltas_of`)."""
    pair = job.compared()
    if pair is None:
        return []
    found = (
        (row["rate_per_s"], deltas_of(row.get("comparisons") or (), pair))
        for row in job.result_as(CapacityResult)["deltas"]
    )
    return [(rate, c) for rate, c in found if c is not None]


def _deltas(rows: list[tuple[float, Mapping[str, Any]]]) -> Figure | None:
    with_requests = [(rate, c) for rate, c in rows if c.get("per_request")]
    if not with_requests:
        return None
    label = with_requests[0][1]["label"]
    traces = []
    for i, (rate, c) in enumerate(with_requests):
        cdf = c["per_request"]["cdf_ms"]
        shade = int(200 - 170 * i / max(1, len(with_requests) - 1))
        traces.append(
            go.Scatter(
                x=cdf,
                y=[q / (len(cdf) - 1) for q in range(len(cdf))],
                name=f"{rate:g}/s" + (" (overloaded: queueing)" if c.get("queueing") else ""),
                mode="lines",
                line={"color": f"rgb({shade},{shade},{shade})", "shape": "hv"},
            )
        )
    layout = base_layout(
        f"{label} TTFT per request ({PERCENTILE_OF_DIFFERENCES}), a CDF per rate",
        xaxis={"title": {"text": f"{label} TTFT (ms)"}, "zeroline": True},
        yaxis={"title": {"text": "share of requests"}, "range": [0, 1]},
    )
    return Figure("deltas", f"{label} per request", go.Figure(traces, layout))


def figures(job: JobData) -> list[Figure]:
    if not job.result:
        return [empty("ttft", "TTFT vs request rate", "the capacity curves are drawn when the job finishes")]
    result = job.result_as(CapacityResult)
    out = [
        Figure("ttft", "TTFT vs request rate", _ttft(result)),
        Figure("goodput", "Goodput and capacity", _goodput(result), capacity_summary(result)),
        Figure("attainment", "SLO attainment", _attainment(result)),
    ]
    deltas = _deltas(pair_rows(job))
    return out if deltas is None else [*out, deltas]


def capacity_summary(result: CapacityResult) -> str:
    """Each policy's capacity between the rate met and the first missed (the goodput figure's text)."""
    return "; ".join(f"{p['policy']}: {capacity_text(p, result.get('resolution'))}" for p in result["policies"]) + "."


def tables(job: JobData) -> dict[str, Table]:
    if not job.result:
        return {"points": [], "deltas": [], "worst": []}
    result = job.result_as(CapacityResult)
    searched = {id(pt) for p in result["policies"] for pt in p.get("search", [])}
    points = [
        {
            "policy": p["policy"],
            "rate_per_s": pt["rate_per_s"],
            "searched": id(pt) in searched,
            "meets_slo": pt["meets_slo"],
            **{
                f"{k}_{part}": pt[k][part]
                for k in ("ttft_p50_ms", "ttft_p99_ms", "itl_p99_ms", "goodput_per_s", "attainment")
                for part in ("mean", "low", "high")
            },
            "overloaded": pt.get("overloaded"),
            "sustained_per_s": pt.get("sustained_per_s"),
            "capacity_per_s": p["capacity_per_s"],
            "first_missed_per_s": p.get("first_missed_per_s"),
        }
        for p in result["policies"]
        for pt in points_of(p)
    ]
    rows = pair_rows(job)
    worst = [{"rate_per_s": rate, **w} for rate, c in rows if c.get("per_request") for w in c["per_request"]["worst"]]
    return {"points": points, "deltas": delta_rows(rows), "worst": worst}


def delta_rows(rows: list[tuple[float, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The picked pair's after - before per rate, both deltas in columns named by what they are."""
    out = []
    for rate, c in rows:
        differences = capacity_differences(c)
        if not differences:
            continue
        per = c.get("per_request") or {}
        out.append(
            {
                "rate_per_s": rate,
                "before": c["before"],
                "after": c["after"],
                "overloaded_queueing": c.get("queueing"),
                **{f"{column(DIFFERENCE_OF_PERCENTILES)}_{q}_ms": differences[q]["mean"] for q in ("p50", "p99")},
                **{f"{column(PERCENTILE_OF_DIFFERENCES)}_{q}_ms": per.get(q) for q in ("p50", "p99")},
            }
        )
    return out


VIEWS = KindViews(figures, tables=tables)
