"""Capacity at an SLO, per policy: up to what request rate does each policy still meet a latency
target, and how much traffic within the target (goodput) does it serve at each rate?

The rate is stepped geometrically (a trace's gaps scaled, Poisson drawn at it); a policy's capacity
is the highest rate up to which every stepped rate meets the SLO (as `vllm bench sweep serve_sla`
searches), then narrowed by a bisection to `resolution`. A rate whose run did not keep up with its
traffic misses: a queue still growing when a short run ends would miss on a longer one. Poisson
runs `repeats` seeded draws per rate, with 95 % intervals; a trace on a fixed execution model runs
once and says it is deterministic. `docs/analyses.md` states the grid, the search, goodput and the
size check (`check`, which names the parameter to lower) in full.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, TypedDict

from .. import saturation
from ..comparison import Pair, default_pair, deltas_of, ordered_pairs, request_deltas
from ..deltas import DIFFERENCE_OF_PERCENTILES, PERCENTILE_OF_DIFFERENCES, capacity_differences
from ..errors import InvalidInput
from ..events import ProgressEvent
from ..scheduler import Arrival, LaneOutcome, SchedulerConfig, ScheduleResult, schedule
from ..stats import interval95, nearest_rank, round6
from ..traffic import TraceTraffic, TrafficShape, poisson_arrivals, work_units
from . import simulate
from .catalogs import execution_dict, execution_of
from .contract import Analysis, Emit
from .pacing import Ticker
from .params import FloatParam, IntParam, OptionalFloatParam, PolicyListParam

DEFAULT_TTFT_P99_MS = 2000.0  # MLPerf Inference's Llama-2 server scenario: TTFT p99 <= 2 s
DEFAULT_ITL_P99_MS = 200.0  # ... and time per output token p99 <= 200 ms
POISSON = ("prompt_min", "prompt_max", "output_min", "output_max", "span_share", "seed")
CENTRE_SPAN = 4.0  # a trace's default rates: its own rate / 4 to x 4
POISSON_RATES = (0.1, 8.0)  # Poisson's default rates (it has no rate of its own)
MAX_WORK = 80_000_000  # about 20 minutes of the step loop on one loaded core (~65,000 units/s)


def rate_range(params: dict[str, Any]) -> tuple[float, float]:
    """The lowest and highest rate stepped: as given, or centred on a trace's own rate."""
    native = native_rate(params)
    low, high = params["rate_min_per_s"], params["rate_max_per_s"]
    if low is None:
        low = native / CENTRE_SPAN if native else POISSON_RATES[0]
    if high is None:
        high = native * CENTRE_SPAN if native else POISSON_RATES[1]
    return round6(low), round6(high)


def native_rate(params: dict[str, Any]) -> float | None:
    """The trace's own requests per second (its window and limit applied); None for Poisson."""
    return None if params["trace"] is None else simulate.selected_trace({**params, "time_scale": 1.0}).rate_per_s()


def rates(params: dict[str, Any]) -> list[float]:
    """`steps` rates from the lowest to the highest, geometrically spaced."""
    lo, hi = rate_range(params)
    n = params["steps"]
    return [hi] if n == 1 else [round6(lo * (hi / lo) ** (i / (n - 1))) for i in range(n)]


def search_steps(params: dict[str, Any]) -> int:
    """The most runs the search adds per policy: halvings of one grid step (geometric) until the
    rates met and missed are within `resolution` of each other; 0 without a grid to narrow."""
    lo, hi = rate_range(params)
    n, resolution = params["steps"], params["resolution"]
    if n == 1 or resolution == 0 or hi <= lo:
        return 0
    step = (hi / lo) ** (1 / (n - 1))
    return max(0, math.ceil(math.log2(math.log(step) / math.log1p(resolution))))


def check(params: dict[str, Any]) -> None:
    simulate.check({**params, "boot_catalog": None, "time_scale": 1.0})
    if params["trace"] is not None and native_rate(params) is None:
        raise InvalidInput("trace", "needs requests at two different times to have a rate to scale")
    lo, hi = rate_range(params)
    if lo > hi:
        name = "rate_min_per_s" if params["rate_min_per_s"] is not None else "rate_max_per_s"
        raise InvalidInput(name, f"must leave rate_min_per_s <= rate_max_per_s ({lo:g} > {hi:g})")
    _refuse_if_too_large(params)


def _refuse_if_too_large(params: dict[str, Any]) -> None:
    """A run over MAX_WORK is refused naming what to lower and the largest value that fits: the
    trace's `limit` (its first requests), or Poisson's `requests`."""
    total = work(params)
    if total <= MAX_WORK:
        return
    runs = planned_runs(params)
    head = f"this capacity run is too large ({total:,} work units for {runs} runs, limit {MAX_WORK:,})"
    if params["trace"] is None:
        fits = MAX_WORK // (runs * simulate.poisson_units(params))
        raise InvalidInput("requests", f"{head}: set requests to at most {fits:,}, or take fewer steps or policies")
    selected = simulate.selected_trace({**params, "time_scale": 1.0, "limit": 0})
    low, high = 0, len(selected)  # the largest limit whose run fits: work grows with it
    while low < high:
        mid = (low + high + 1) // 2
        if runs * work_units(selected.select(limit=mid)) <= MAX_WORK:
            low = mid
        else:
            high = mid - 1
    raise InvalidInput(
        "limit",
        f"{head}: set limit to at most {low:,} (the trace's first {low:,} of {len(selected):,} requests), "
        "or take fewer steps or policies, or a coarser resolution",
    )


def repeats(params: dict[str, Any]) -> int:
    """Seeded draws per rate: 1 for a trace (nothing in a trace run is random)."""
    return 1 if params["trace"] is not None else int(params["repeats"])


def planned_runs(params: dict[str, Any]) -> int:
    """Every loop run the grid and the search may take (the search may stop sooner)."""
    return (int(params["steps"]) + search_steps(params)) * len(params["policies"]) * repeats(params)


def work(params: dict[str, Any]) -> int:
    runs = planned_runs(params)
    if params["trace"] is not None:
        return runs * work_units(simulate.selected_trace({**params, "time_scale": 1.0}))
    return runs * int(params["requests"] * simulate.poisson_units(params))


def traffic_at(params: dict[str, Any], rate: float, repeat: int, full_chunk: int) -> list[Arrival]:
    """The traffic at `rate` requests per second: the trace's gaps scaled, or a Poisson draw."""
    if params["trace"] is not None:
        base: TraceTraffic = simulate.selected_trace({**params, "time_scale": 1.0})
        native = base.rate_per_s()
        assert native is not None  # refused by check
        return list(base.select(time_scale=native / rate).arrivals())
    shape = TrafficShape(rate, **{f: params[f] for f in POISSON} | {"seed": params["seed"] + repeat})
    return list(itertools.islice(poisson_arrivals(shape, full_chunk), params["requests"]))


def attains(lane: LaneOutcome, ttft_ms: float, itl_ms: float) -> bool:
    """The request's TTFT and mean inter-token latency are within the bounds (genai-perf's goodput)."""
    mean_itl = (lane.finish_ms - lane.first_token_at_ms) / (lane.tokens - 1) if lane.tokens > 1 else 0.0
    return lane.ttft_ms <= ttft_ms and mean_itl <= itl_ms


def measure(result: ScheduleResult, params: dict[str, Any], arrivals: list[Arrival]) -> dict[str, Any]:
    """One run's figures at one rate, and its load (`saturation`)."""
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
        "load": saturation.judge([a.arrival_ms for a in arrivals], [lane.first_token_at_ms for lane in result.lanes]),
    }


class CapacityResult(TypedDict):
    """Per policy, a point per stepped rate against the SLO, the search's points between the last
    rate met and the first missed (`search`), the highest rate met (`capacity_per_s`) and the lowest
    missed above it (`first_missed_per_s`); `deltas`: per stepped rate, every ordered pair of the
    policies compared (`comparisons`), both kinds of delta named."""

    execution: dict[str, Any]
    catalog: str
    traffic: dict[str, Any]
    slo: dict[str, float]
    rates_per_s: list[float]
    resolution: float
    repeats: int
    randomness: str
    policies: list[dict[str, Any]]
    deltas: list[dict[str, Any]]


class _Runs:
    """Runs the loop for one policy at one rate (every repeat), ticking progress within each run
    so a cancel is seen at once, and keeps the first repeat's summary for the per-request deltas."""

    def __init__(self, params: dict[str, Any], emit: Emit) -> None:
        self.params, self.execution = params, execution_of(params)
        self.catalog = simulate.build_catalog(params, self.execution)
        self.repeats = repeats(params)
        trace = params["trace"]
        self.requests = (
            params["requests"] if trace is None else len(simulate.selected_trace({**params, "time_scale": 1.0}))
        )
        self.ticker = Ticker(emit, planned_runs(params) * self.requests)
        self.done = 0

    def at(self, name: str, rate: float, what: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """(each repeat's figures, the first repeat's summary) of `name` at `rate`."""
        runs, first = [], {}
        for repeat in range(self.repeats):
            arrivals = traffic_at(self.params, rate, repeat, self.catalog.full_chunk)
            config = SchedulerConfig(name, self.params["max_lanes"], self.params["max_decode_wait"])
            before = self.done * self.requests

            def on_progress(finished: int, launches: int, before: int = before, n: int = len(arrivals)) -> None:
                self.ticker.tick(before + finished, f"{what}: {rate:g}/s {name}, {finished}/{n} requests")

            result = schedule(arrivals, self.catalog, self.execution, config, on_progress)
            runs.append(measure(result, self.params, arrivals))
            if repeat == 0:
                first = simulate.summarise(result, arrivals)
            self.done += 1
            self.ticker.tick(self.done * self.requests, f"{what}: {rate:g}/s {name} {repeat + 1}/{self.repeats}")
        return runs, first


def run(params: dict[str, Any], emit: Emit) -> CapacityResult:
    steps, names = rates(params), params["policies"]
    runner = _Runs(params, emit)
    points: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    deltas: list[dict[str, Any]] = []
    for rate in steps:
        runs, first = {}, {}
        for name in names:
            runs[name], first[name] = runner.at(name, rate, "stepping")
            points[name].append(_point(rate, runs[name], params))
        deltas.append(_delta(rate, runs, first))
    policies = [_searched(name, points[name], runner) for name in names]
    runner.ticker.tick(runner.ticker.total, "done")
    return {
        "execution": execution_dict(runner.execution),
        "catalog": params["catalog"],
        "traffic": _traffic(params),
        "slo": {"ttft_p99_ms": params["ttft_p99_ms"], "itl_p99_ms": params["itl_p99_ms"]},
        "rates_per_s": steps,
        "resolution": params["resolution"],
        "repeats": runner.repeats,
        "randomness": (
            "none: a trace on a fixed execution model is deterministic, so each rate runs once"
            if params["trace"] is not None
            else f"{runner.repeats} seeded Poisson draws per rate (seeds {params['seed']}..{params['seed'] + runner.repeats - 1}); "
            "intervals are 95 % (Student t) over them"
        ),
        "policies": policies,
        "deltas": deltas,
    }


def _searched(name: str, points: list[dict[str, Any]], runner: _Runs) -> dict[str, Any]:
    """A policy's capacity narrowed between its last stepped rate met and the first missed: the
    geometric middle each time, until the two are within the resolution (or the search's runs,
    `search_steps`, are spent)."""
    met = capacity(points)
    missed = next((pt["rate_per_s"] for pt in points if not pt["meets_slo"]), None)
    search: list[dict[str, Any]] = []
    if met is not None and missed is not None:
        for _ in range(search_steps(runner.params)):
            if missed / met <= 1 + runner.params["resolution"]:
                break
            rate = round6(math.sqrt(met * missed))
            point = _point(rate, runner.at(name, rate, "searching")[0], runner.params)
            search.append(point)
            met, missed = (rate, missed) if point["meets_slo"] else (met, rate)
    return {"policy": name, "capacity_per_s": met, "first_missed_per_s": missed, "points": points, "search": search}


def _point(rate: float, runs: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """A policy at one rate: every figure's mean and 95 % interval over the repeats, the load
    (overloaded when any repeat was, with the rate it sustained: the mean over the repeats) and the
    verdict: the SLO is met when no repeat stalled or was overloaded and both p99s are in bounds."""
    figures = {k: interval95([r[k] for r in runs]) for k in ("ttft_p50_ms", "ttft_p99_ms", "itl_p99_ms")}
    figures |= {k: interval95([r[k] for r in runs]) for k in ("goodput_per_s", "attainment", "padded_prefill_ms")}
    loads = [r["load"] for r in runs if r["load"].judged]
    overloaded = any(load.overloaded for load in loads)
    meets = (
        not any(r["stalled"] for r in runs)
        and not overloaded  # its queue still grew at the end: a longer run would miss, so no capacity
        and figures["ttft_p99_ms"]["mean"] <= params["ttft_p99_ms"]
        and figures["itl_p99_ms"]["mean"] <= params["itl_p99_ms"]
    )
    sustained = [load.sustained_per_s for load in loads]
    # each draw's TTFT percentiles, kept so any two policies can be compared paired by seed (comparison.py)
    draws = {k: [r[k] for r in runs] for k in ("ttft_p50_ms", "ttft_p99_ms")}
    return {
        "rate_per_s": rate,
        "meets_slo": meets,
        **figures,
        "overloaded": overloaded,
        "sustained_per_s": round6(sum(sustained) / len(sustained)) if sustained else None,
        "draws": draws,
    }


def capacity(points: list[dict[str, Any]]) -> float | None:
    """The highest rate up to which every stepped rate meets the SLO (None: not even the lowest)."""
    best = None
    for point in points:
        if not point["meets_slo"]:
            break
        best = point["rate_per_s"]
    return best


def _delta(rate: float, runs: dict[str, list[dict[str, Any]]], first: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every ordered pair of the policies run compared at one rate (`comparison.ordered_pairs`, so
    a reader may pick any two), both deltas named: after - before's difference of the TTFT
    percentiles p50 and p99 with their 95 % intervals over the repeats (paired by seed), and the
    per-request comparison of the first repeat (percentiles of per-request differences);
    `queueing` when either policy was overloaded there."""
    comparisons = []
    for pair in ordered_pairs(list(runs)):
        before, after = runs[pair.before], runs[pair.after]
        row: dict[str, Any] = {**pair.to_dict(), "definition": DIFFERENCE_OF_PERCENTILES}
        for key in ("ttft_p50_ms", "ttft_p99_ms"):
            row[f"difference_of_{key}"] = interval95([a[key] - b[key] for a, b in zip(after, before)])
        row["queueing"] = any(r["load"].overloaded for r in (*before, *after))
        row["per_request"] = request_deltas([first[pair.before], first[pair.after]], pair)
        comparisons.append(row)
    return {"rate_per_s": rate, "comparisons": comparisons}


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


def format_text(result: CapacityResult, pair: Pair | None = None) -> str:
    """A line per rate and policy (the search's rates marked), `pair` compared (after - before; by
    default the first two policies) per rate with both deltas named, then each policy's capacity between the last rate met and the first missed."""
    slo = result["slo"]
    lines = [
        f"SLO: TTFT p99 <= {slo['ttft_p99_ms']:g} ms, ITL p99 <= {slo['itl_p99_ms']:g} ms; {result['randomness']}",
        "rate/s    policy  ttft p50 ms  ttft p99 ms  itl p99 ms  goodput/s  attained  meets  load",
    ]
    for p in result["policies"]:
        for pt in sorted([*p["points"], *p.get("search", [])], key=lambda pt: pt["rate_per_s"]):
            lines.append(_point_line(p["policy"], pt, searched=pt in p.get("search", [])))
    pair = pair or default_pair([p["policy"] for p in result["policies"]])
    for row in result["deltas"]:
        lines += _delta_lines(row["rate_per_s"], deltas_of(row.get("comparisons") or (), pair) if pair else None)
    for p in result["policies"]:
        lines.append(f"capacity {p['policy']}: {capacity_text(p, result.get('resolution'))}")
    if any(p.get("search") for p in result["policies"]):
        lines.append("* a rate the search ran between the last stepped rate met and the first missed")
    return "\n".join(lines)


def _point_line(policy: str, pt: dict[str, Any], *, searched: bool) -> str:
    if "overloaded" not in pt:  # a result older than the load verdict
        load = ""
    else:
        load = f"overloaded, sustained {pt['sustained_per_s']:g}/s" if pt["overloaded"] else "-"
    return (
        f"{pt['rate_per_s']:<9.4g}{'*' if searched else ' '}{policy:<7} {pt['ttft_p50_ms']['mean']:>11.1f}  "
        f"{pt['ttft_p99_ms']['mean']:>11.1f}  {pt['itl_p99_ms']['mean']:>10.1f}  {pt['goodput_per_s']['mean']:>9.3f}  "
        f"{pt['attainment']['mean']:>8.1%}  {'yes' if pt['meets_slo'] else 'no':<5}  {load}"
    )


def _delta_lines(rate: float, row: Any) -> list[str]:
    """One rate's comparison of a pair (`_delta`'s), both deltas named; none when it compares nothing."""
    differences = capacity_differences(row) if row else {}
    if not differences:
        return []
    p50, p99 = differences["p50"]["mean"], differences["p99"]["mean"]
    queueing = " (overloaded: queueing, not the policy)" if row.get("queueing") else ""
    lines = [f"{row['label']} at {rate:g}/s{queueing}, {DIFFERENCE_OF_PERCENTILES}: p50 {p50:+.2f} p99 {p99:+.2f} ms"]
    per = row.get("per_request")
    if per and per["requests"]:
        lines.append(f"    {PERCENTILE_OF_DIFFERENCES}: p50 {per['p50']:+.2f} p99 {per['p99']:+.2f} ms")
    return lines


def capacity_text(policy: dict[str, Any], resolution: float | None) -> str:
    """'3.48 requests/s (met; 3.61/s missed, within the 5 % resolution)', or why there is none."""
    cap, missed = policy["capacity_per_s"], policy.get("first_missed_per_s")
    if cap is None:
        return "below the lowest rate"
    if missed is None:
        return f"{cap:g} requests/s or more (every rate stepped met the SLO)"
    within = (
        ""
        if not resolution
        else f", {'within' if missed / cap <= 1 + resolution else 'wider than'} the {resolution:.0%} resolution"
    )
    return f"{cap:g} requests/s (met; {missed:g}/s missed{within})"


ANALYSIS = Analysis(
    name="capacity",
    summary="The highest request rate at which each policy meets a TTFT p99 / ITL p99 SLO, with goodput and "
    "attainment at each rate (a trace time-scaled, or Poisson).",
    params=(
        simulate.SHARED["trace"],
        simulate.SHARED["window"],
        simulate.SHARED["limit"],
        OptionalFloatParam(
            "rate_min_per_s",
            None,
            "lowest request rate stepped (left out: a trace's own rate / 4; Poisson 0.1)",
            minimum=0.001,
            maximum=1e5,
        ),
        OptionalFloatParam(
            "rate_max_per_s",
            None,
            "highest request rate stepped, at least rate_min_per_s (left out: a trace's own rate x 4; Poisson 8)",
            minimum=0.001,
            maximum=1e5,
        ),
        IntParam("steps", 5, "rates stepped (geometric from min to max)", minimum=1, maximum=64),
        FloatParam(
            "resolution",
            0.05,
            "the search narrows each capacity until the rate met and the first missed are within this share "
            "(0: the stepped rates only)",
            minimum=0.0,
            maximum=1.0,
        ),
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
    only_with=simulate.TRACE_ONLY,
    check=check,
    work=work,
    max_work=MAX_WORK,  # enforced by check, which names what to lower
    format_text=format_text,
    pair_text=format_text,
    result=CapacityResult,
    events=(ProgressEvent,),
    example={"requests": 16, "steps": 3, "repeats": 2, "prompt_max": 4000, "output_max": 20, "rate_max_per_s": 40},
)
