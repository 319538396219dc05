"""Capacity at an SLO, per policy: up to what request rate does each policy still meet a latency
target, and how much traffic within the target (goodput) does it serve at each rate?

The rate is stepped geometrically from `rate_min_per_s` to `rate_max_per_s`: a trace's gaps are
scaled to reach each rate (its requests, prompts and outputs unchanged), Poisson traffic is drawn
at it. A rate meets the SLO when TTFT p99 <= `ttft_p99_ms` and ITL p99 (every gap between two
tokens) <= `itl_p99_ms`; a policy's capacity is the highest stepped rate up to which every rate
meets it (as `vllm bench sweep serve_sla` searches). Per request, genai-perf's and DistServe's
goodput: a request attains the SLO when its TTFT and its mean inter-token latency are within the
bounds; goodput is attaining requests per second of the run, attainment their share.

Poisson traffic runs `repeats` seeded draws per rate (seed, seed + 1, ...), and every figure that
depends on them has a 95 % interval over the repeats (Student t). A trace on a fixed execution
model has no randomness: one run per rate, and the result says so.
"""

from __future__ import annotations

import itertools
from typing import Any, TypedDict

from ..errors import InvalidInput
from ..events import ProgressEvent
from ..scheduler import Arrival, LaneOutcome, SchedulerConfig, ScheduleResult, schedule
from ..stats import interval95, nearest_rank, round6
from ..traffic import TraceTraffic, TrafficShape, poisson_arrivals, work_units
from . import simulate
from .catalogs import execution_dict, execution_of
from .contract import Analysis, Emit
from .pacing import Ticker
from .params import FloatParam, IntParam, PolicyListParam

DEFAULT_TTFT_P99_MS = 2000.0  # MLPerf Inference's Llama-2 server scenario: TTFT p99 <= 2 s
DEFAULT_ITL_P99_MS = 200.0  # ... and time per output token p99 <= 200 ms
POISSON = ("prompt_min", "prompt_max", "output_min", "output_max", "span_share", "seed")


def rates(params: dict[str, Any]) -> list[float]:
    """`steps` rates from rate_min to rate_max, geometrically spaced."""
    lo, hi, n = params["rate_min_per_s"], params["rate_max_per_s"], params["steps"]
    if n == 1:
        return [round6(hi)]
    return [round6(lo * (hi / lo) ** (i / (n - 1))) for i in range(n)]


def check(params: dict[str, Any]) -> None:
    simulate.check({**params, "boot_catalog": None, "time_scale": 1.0})
    if params["rate_min_per_s"] > params["rate_max_per_s"]:
        raise InvalidInput(
            "rate_min_per_s", f"must be <= rate_max_per_s ({params['rate_min_per_s']} > {params['rate_max_per_s']})"
        )
    if params["trace"] is not None and simulate.selected_trace({**params, "time_scale": 1.0}).rate_per_s() is None:
        raise InvalidInput("trace", "needs requests at two different times to have a rate to scale")


def repeats(params: dict[str, Any]) -> int:
    """Seeded draws per rate: 1 for a trace (nothing in a trace run is random)."""
    return 1 if params["trace"] is not None else int(params["repeats"])


def work(params: dict[str, Any]) -> int:
    runs = int(params["steps"]) * len(params["policies"]) * repeats(params)
    if params["trace"] is not None:
        return runs * work_units(simulate.selected_trace({**params, "time_scale": 1.0}))
    per_request = (params["output_min"] + params["output_max"]) // 2 + params["prompt_max"] // 1024 + 2
    return runs * int(params["requests"] * per_request)


def traffic_at(params: dict[str, Any], rate: float, repeat: int, full_chunk: int) -> list[Arrival]:
    """The traffic at `rate` requests per second: the trace's gaps scaled, or a Poisson draw."""
    if params["trace"] is not None:
        base: TraceTraffic = simulate.selected_trace({**params, "time_scale": 1.0})
        native = base.rate_per_s()
        assert native is not None  # refused by check
        return list(base.select(time_scale=native / rate).arrivals())
    shape = TrafficShape(
        rate,
        params["prompt_min"],
        params["prompt_max"],
        params["output_min"],
        params["output_max"],
        params["span_share"],
        params["seed"] + repeat,
    )
    return list(itertools.islice(poisson_arrivals(shape, full_chunk), params["requests"]))


def attains(lane: LaneOutcome, ttft_ms: float, itl_ms: float) -> bool:
    """The request's TTFT and mean inter-token latency are within the bounds (genai-perf's goodput)."""
    mean_itl = (lane.finish_ms - lane.first_token_at_ms) / (lane.tokens - 1) if lane.tokens > 1 else 0.0
    return lane.ttft_ms <= ttft_ms and mean_itl <= itl_ms


def measure(result: ScheduleResult, params: dict[str, Any]) -> dict[str, Any]:
    """One run's figures at one rate."""
    ttft = sorted(lane.ttft_ms for lane in result.lanes)
    itl = sorted(result.itl_ms)
    met = sum(attains(lane, params["ttft_p99_ms"], params["itl_p99_ms"]) for lane in result.lanes)
    start = min((lane.arrival_ms for lane in result.lanes), default=0.0)
    seconds = max(result.end_ms - start, 1e-9) / 1000.0
    n = len(result.lanes)
    return {
        "ttft_p50_ms": nearest_rank(ttft, 50) if ttft else 0.0,  # nothing finished: a stall, which never meets
        "ttft_p99_ms": nearest_rank(ttft, 99) if ttft else 0.0,
        "itl_p99_ms": nearest_rank(itl, 99) if itl else 0.0,
        "goodput_per_s": met / seconds,
        "attainment": met / n if n else 0.0,
        "padded_prefill_ms": result.padded_prefill_ms,
        "finished": n,
        "stalled": result.stall is not None,
    }


class CapacityResult(TypedDict):
    """Per policy, a point per stepped rate against the SLO and the highest rate meeting it
    (`capacity_per_s`); `deltas`: rule - cost per rate."""

    execution: dict[str, Any]
    catalog: str
    traffic: dict[str, Any]
    slo: dict[str, float]
    rates_per_s: list[float]
    repeats: int
    randomness: str
    policies: list[dict[str, Any]]
    deltas: list[dict[str, Any]]


def run(params: dict[str, Any], emit: Emit) -> CapacityResult:
    execution = execution_of(params)
    catalog = simulate.build_catalog(params, execution)
    steps, n_repeats, names = rates(params), repeats(params), params["policies"]
    ticker = Ticker(emit, len(steps) * len(names) * n_repeats)
    done = 0
    points: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    deltas: list[dict[str, Any]] = []
    for rate in steps:
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        first: dict[str, dict[str, Any]] = {}
        for repeat in range(n_repeats):
            arrivals = traffic_at(params, rate, repeat, catalog.full_chunk)
            for name in names:
                config = SchedulerConfig(name, params["max_lanes"], params["max_decode_wait"])
                result = schedule(arrivals, catalog, execution, config)
                runs[name].append(measure(result, params))
                if repeat == 0:
                    first[name] = simulate.summarise(result, arrivals)
                done += 1
                ticker.tick(done, f"{rate:g}/s {name} {repeat + 1}/{n_repeats}")
        for name in names:
            points[name].append(_point(rate, runs[name], params))
        deltas.append(_delta(rate, runs, first))
    policies = [{"policy": name, "capacity_per_s": capacity(points[name]), "points": points[name]} for name in names]
    return {
        "execution": execution_dict(execution),
        "catalog": params["catalog"],
        "traffic": _traffic(params),
        "slo": {"ttft_p99_ms": params["ttft_p99_ms"], "itl_p99_ms": params["itl_p99_ms"]},
        "rates_per_s": steps,
        "repeats": n_repeats,
        "randomness": (
            "none: a trace on a fixed execution model is deterministic, so each rate runs once"
            if params["trace"] is not None
            else f"{n_repeats} seeded Poisson draws per rate (seeds {params['seed']}..{params['seed'] + n_repeats - 1}); "
            "intervals are 95 % (Student t) over them"
        ),
        "policies": policies,
        "deltas": deltas,
    }


def _point(rate: float, runs: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """A policy at one rate: every figure's mean and 95 % interval over the repeats, and the verdict."""
    figures = {k: interval95([r[k] for r in runs]) for k in ("ttft_p50_ms", "ttft_p99_ms", "itl_p99_ms")}
    figures |= {k: interval95([r[k] for r in runs]) for k in ("goodput_per_s", "attainment", "padded_prefill_ms")}
    meets = (
        not any(r["stalled"] for r in runs)
        and figures["ttft_p99_ms"]["mean"] <= params["ttft_p99_ms"]
        and figures["itl_p99_ms"]["mean"] <= params["itl_p99_ms"]
    )
    return {"rate_per_s": rate, "meets_slo": meets, **figures}


def capacity(points: list[dict[str, Any]]) -> float | None:
    """The highest rate up to which every stepped rate meets the SLO (None: not even the lowest)."""
    best = None
    for point in points:
        if not point["meets_slo"]:
            break
        best = point["rate_per_s"]
    return best


def _delta(rate: float, runs: dict[str, list[dict[str, Any]]], first: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """rule - cost at one rate: p50 and p99 TTFT with their 95 % intervals over the repeats (paired by
    seed), and the per-request comparison of the first repeat."""
    row: dict[str, Any] = {"rate_per_s": rate}
    if "cost" in runs and "rule" in runs:
        for key in ("ttft_p50_ms", "ttft_p99_ms"):
            row[key] = interval95([r[key] - c[key] for r, c in zip(runs["rule"], runs["cost"])])
        row["per_request"] = simulate.request_deltas(list(first.values()))
    return row


def _traffic(params: dict[str, Any]) -> dict[str, Any]:
    if params["trace"] is None:
        return {"source": "poisson", "requests": params["requests"], "seed": params["seed"]}
    base = simulate.selected_trace({**params, "time_scale": 1.0})
    return {
        "source": "trace",
        "name": base.name,
        "requests": len(base),
        "native_rate_per_s": round6(base.rate_per_s() or 0.0),
        "window_s": params["window"],
        "limit": params["limit"],
    }


def format_text(result: CapacityResult) -> str:
    """A line per rate and policy, then each policy's capacity."""
    slo = result["slo"]
    lines = [
        f"SLO: TTFT p99 <= {slo['ttft_p99_ms']:g} ms, ITL p99 <= {slo['itl_p99_ms']:g} ms; {result['randomness']}",
        "rate/s    policy  ttft p50 ms  ttft p99 ms  itl p99 ms  goodput/s  attained  meets",
    ]
    for i, rate in enumerate(result["rates_per_s"]):
        for p in result["policies"]:
            pt = p["points"][i]
            lines.append(
                f"{rate:<9.3f} {p['policy']:<7} {pt['ttft_p50_ms']['mean']:>11.1f}  {pt['ttft_p99_ms']['mean']:>11.1f}  "
                f"{pt['itl_p99_ms']['mean']:>10.1f}  {pt['goodput_per_s']['mean']:>9.3f}  "
                f"{pt['attainment']['mean']:>8.1%}  {'yes' if pt['meets_slo'] else 'no'}"
            )
    for p in result["policies"]:
        cap = p["capacity_per_s"]
        lines.append(f"capacity {p['policy']}: " + ("below the lowest rate" if cap is None else f"{cap:g} requests/s"))
    return "\n".join(lines)


ANALYSIS = Analysis(
    name="capacity",
    summary="The highest request rate at which each policy meets a TTFT p99 / ITL p99 SLO, with goodput and "
    "attainment at each rate (a trace time-scaled, or Poisson).",
    params=(
        simulate.SHARED["trace"],
        simulate.SHARED["window"],
        simulate.SHARED["limit"],
        FloatParam("rate_min_per_s", 0.1, "lowest request rate stepped", minimum=0.001, maximum=1e5),
        FloatParam("rate_max_per_s", 8.0, "highest request rate stepped", minimum=0.001, maximum=1e5),
        IntParam("steps", 8, "rates stepped (geometric from min to max)", minimum=1, maximum=64),
        FloatParam("ttft_p99_ms", DEFAULT_TTFT_P99_MS, "SLO: TTFT p99 bound (ms)", minimum=0.0, maximum=1e6),
        FloatParam(
            "itl_p99_ms", DEFAULT_ITL_P99_MS, "SLO: inter-token latency p99 bound (ms)", minimum=0.0, maximum=1e6
        ),
        PolicyListParam("policies", help="policies to compare on the same traffic"),
        IntParam("repeats", 5, "seeded Poisson draws per rate (a trace runs once)", minimum=1, maximum=100),
        IntParam("requests", 1000, "Poisson requests per run", minimum=1, maximum=20_000),
        *(simulate.SHARED[name] for name in POISSON),
        *(simulate.SHARED[name] for name in simulate.SETTING),
    ),
    run=run,
    check=check,
    work=work,
    max_work=40_000_000,
    format_text=format_text,
    result=CapacityResult,
    events=(ProgressEvent,),
)
