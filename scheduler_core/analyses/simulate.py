"""Traffic through the multi-lane scheduler, per policy: what a maintainer sees of a policy under
load (time to first token, inter-token latency, launches, padding), not just for one lone prompt.

Arrivals are Poisson or a real trace's; the same traffic runs under every chosen policy, and
`deltas` compares the first two request by request. `rule-v1` may be chosen: with spans in the
traffic and an unmeasured full chunk it shows the stall, reported with its request and position."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, TypedDict

from .. import saturation
from ..catalog import DEFAULT_PREFILL_CAPACITIES, Catalog, drift, unmeasured
from ..comparison import Pair, default_pair, request_deltas
from ..deltas import DIFFERENCE_OF_PERCENTILES, PERCENTILE_OF_DIFFERENCES
from ..errors import InvalidInput
from ..events import PolicyResultEvent, ProgressEvent, StepLaunchEvent
from ..execution import ExecutionModel, TableExecution, measured_catalog
from ..limits import MAX_TOKENS
from ..scheduler import Arrival, SchedulerConfig, ScheduleResult, schedule
from ..stats import percentiles, quantiles, round6
from ..traffic import TraceTraffic, TrafficShape, poisson_arrivals, work_units
from .catalogs import (
    CATALOG_NAMES,
    DRIFT_PARAM,
    EXECUTION_PARAMS,
    EXECUTION_PROFILE,
    boot_or_profile_schema,
    check_boot_or_profile,
    execution_dict,
    execution_of,
)
from .contract import Analysis, Emit, Param
from .pacing import Ticker
from .params import (
    CatalogParam,
    ChoiceParam,
    FloatParam,
    IntListParam,
    IntParam,
    PolicyListParam,
    TraceParam,
    WindowParam,
)

DECODE_ROWS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
MAX_LANES = DECODE_ROWS[-1]
CATALOGS: tuple[str, ...] = CATALOG_NAMES + ("unmeasured-full",)
TRAFFIC_FIELDS: tuple[str, ...] = tuple(TrafficShape.__dataclass_fields__)


TRACE_PARAMS = (
    TraceParam("trace", None, "real traffic instead of Poisson (replaces requests, rate_per_s and the length ranges)"),
    FloatParam("time_scale", 1.0, "the trace's gaps times this (2: half its rate)", minimum=0.001, maximum=1000.0),
    WindowParam("window", None, "only the trace's requests arriving in [START, END) seconds of its clock"),
    IntParam("limit", 0, "at most this many of the trace's requests (0: all)", minimum=0, maximum=2_000_000),
)


# A trace's own parameters apply only with a trace (`Analysis.only_with`, for every kind declaring them).
TRACE_ONLY = {p.name: "trace" for p in TRACE_PARAMS[1:]}


def poisson_params(*, prompt_max: int, output_min: int, output_max: int) -> tuple[Param, ...]:
    """Poisson traffic's lengths, atomic spans and seed, declared once: simulate's and the simulated
    engine's (which keeps its prompts and outputs shorter by default)."""
    return (
        IntParam("prompt_min", 32, "shortest prompt (tokens; lengths are log-uniform)", minimum=1, maximum=MAX_TOKENS),
        IntParam(
            "prompt_max", prompt_max, "longest prompt (tokens; at least prompt_min)", minimum=1, maximum=MAX_TOKENS
        ),
        IntParam("output_min", output_min, "fewest output tokens (lengths are uniform)", minimum=1, maximum=100_000),
        IntParam("output_max", output_max, "most output tokens (at least output_min)", minimum=1, maximum=100_000),
        FloatParam("span_share", 0.0, "share of requests holding one atomic span", minimum=0.0, maximum=1.0),
        IntParam("seed", 0, "traffic seed", minimum=0, maximum=2**31 - 1),
    )


def check(params: dict[str, Any]) -> None:
    """Length ranges the right way round; a boot carries traffic only with decode graphs, and no
    more lanes than its largest one has rows."""
    for low, high in (("prompt_min", "prompt_max"), ("output_min", "output_max")):
        if params[low] > params[high]:
            raise InvalidInput(low, f"must be <= {high} ({params[low]} > {params[high]})")
    check_boot_or_profile(params, "boot_catalog")
    if params.get("trace") is not None and not len(selected_trace(params)):
        raise InvalidInput("window", "holds no request of the trace")
    boot: Catalog | None = params["boot_catalog"]
    if boot is None:
        return
    rows = max((g.decode for g in boot.of_kind("decode")), default=0)
    if rows == 0:
        raise InvalidInput(
            "boot_catalog",
            "has no decode graphs to carry the traffic's tokens; capture with graphs 'prefill+decode' or 'all'",
        )
    if params["max_lanes"] > rows:
        raise InvalidInput("max_lanes", f"must be <= {rows}, the rows of the boot's largest decode graph")


def work(params: dict[str, Any]) -> int:
    """About one unit per output token and per prefill chunk, per policy: what the loop's time
    and memory (one float per token) grow with."""
    if params.get("trace") is not None:
        return work_units(selected_trace(params)) * len(params["policies"])
    return int(params["requests"] * len(params["policies"]) * poisson_units(params))


def poisson_units(params: dict[str, Any]) -> int:
    """One Poisson request's units (its mean output tokens and prompt chunks), as `work` counts them."""
    return int((params["output_min"] + params["output_max"]) // 2 + params["prompt_max"] // 1024 + 2)


def selected_trace(params: dict[str, Any]) -> TraceTraffic:
    """The trace's requests in `window`, the first `limit` of them, gaps times `time_scale`."""
    trace: TraceTraffic = params["trace"]
    window = params.get("window")
    return trace.select(None if window is None else (window[0], window[1]), params["limit"], params["time_scale"])


def traffic(params: dict[str, Any], full_chunk: int) -> list[Arrival]:
    """The trace's requests (`selected_trace`), or seeded Poisson arrivals: with probability
    `span_share` a request holds one atomic span (a tool result or an image) no longer than the
    full chunk. The engine job runs the same Poisson stream, endless."""
    if params.get("trace") is not None:
        return list(selected_trace(params).arrivals())
    shape = TrafficShape(**{f: params[f] for f in TRAFFIC_FIELDS})
    return list(itertools.islice(poisson_arrivals(shape, full_chunk), params["requests"]))


def build_catalog(params: dict[str, Any], execution: ExecutionModel) -> Catalog:
    """The chosen catalog with decode graphs of DECODE_ROWS rows and a mixed graph per prefill
    capacity and `mixed_rows` entry; perturbations touch solo prefill graphs only."""
    mixed = tuple((c, d) for c in DEFAULT_PREFILL_CAPACITIES for d in params["mixed_rows"])
    clean = measured_catalog(execution, decode_rows=DECODE_ROWS, mixed=mixed)
    if params["catalog"] == "drift":
        return drift(clean, clean.full_chunk, params["drift_factor"])
    if params["catalog"] == "unmeasured-full":
        return unmeasured(clean, [clean.full_chunk])
    return clean


def boot_setting(params: dict[str, Any]) -> tuple[TableExecution, Catalog, str]:
    """A measured boot as both the catalog and the truth. A boot rarely times the per-request init
    graph; then init costs nothing here, and the result says so."""
    catalog: Catalog = params["boot_catalog"]
    table = {g.shape: g.ms for g in catalog.graphs if g.ms is not None}
    init = "measured" if (0, 0) in table else "not in the boot: counted as 0 ms"
    table.setdefault((0, 0), 0.0)
    return TableExecution(table, params["first_token_ms"]), catalog, init


class SimulateResult(TypedDict):
    """Each policy's figures on the same traffic (`summarise`), and its first two policies compared
    per request (`comparison.request_deltas`: after - before, None unless both ran to the end)."""

    execution: dict[str, Any]
    catalog: str
    traffic: dict[str, Any]
    requests: int
    offered_ms: float
    policies: list[dict[str, Any]]
    deltas: dict[str, Any] | None


def setting(params: dict[str, Any]) -> tuple[ExecutionModel, Catalog, str, dict[str, Any]]:
    """The true costs, the catalog, the catalog's name and the costs as a result states them: the
    boot (`boot_catalog`) as both, or the chosen catalog measured from `execution`."""
    if params["boot_catalog"] is not None:
        table, catalog, init = boot_setting(params)
        return table, catalog, "boot", {**execution_dict(table), "init": init}
    execution = execution_of(params)
    return execution, build_catalog(params, execution), params["catalog"], execution_dict(execution)


def run(params: dict[str, Any], emit: Emit) -> SimulateResult:
    execution, catalog, catalog_name, execution_description = setting(params)
    arrivals = traffic(params, catalog.full_chunk)
    n = len(arrivals)
    ticker = Ticker(emit, n * len(params["policies"]))
    policies = []
    for i, name in enumerate(params["policies"]):

        def on_progress(finished: int, launch_count: int, before: int = i * n, name: str = name) -> None:
            ticker.tick(before + finished, f"{name}: {finished}/{n} requests, {launch_count} launches")

        config = SchedulerConfig(name, params["max_lanes"], params["max_decode_wait"], params["launch_events"])
        result = schedule(arrivals, catalog, execution, config, on_progress)
        for step in result.trace:
            emit({"type": "launch", "policy": name, **step.to_dict()})
        summary = summarise(result, arrivals)
        emit({"type": "policy_result", **{k: v for k, v in summary.items() if k != "per_request"}})
        ticker.tick((i + 1) * n, f"{name} done")
        policies.append(summary)
    return {
        "execution": execution_description,
        "catalog": catalog_name,
        "traffic": traffic_description(params),
        "requests": n,
        "offered_ms": round(arrivals[-1].arrival_ms, 6) if arrivals else 0.0,
        "policies": policies,
        "deltas": request_deltas(policies, default_pair(params["policies"])),
    }


def traffic_description(params: dict[str, Any]) -> dict[str, Any]:
    """Where the arrivals came from, as a result states it."""
    trace: TraceTraffic | None = params.get("trace")
    if trace is None:
        return {"source": "poisson", "rate_per_s": params["rate_per_s"], "seed": params["seed"]}
    return {
        "source": "trace",
        "name": trace.name,
        "format": trace.format,
        "trace_requests": len(trace),
        "window_s": params.get("window"),
        "limit": params["limit"],
        "time_scale": params["time_scale"],
    }


def summarise(result: ScheduleResult, arrivals: Sequence[Arrival]) -> dict[str, Any]:
    """One policy's figures as plain JSON: latency percentiles, launch counts, padding, per request."""
    stall = None if result.stall is None else {"request": result.stall.lane, "position": result.stall.position}
    prompts = {a.id: a for a in arrivals}
    ttft = [lane.ttft_ms for lane in result.lanes]
    return {
        "policy": result.policy,
        "stalled": stall,
        "finished": len(result.lanes),
        "clipped_requests": result.clipped,  # prompts clipped to fit the model's context
        "ttft_ms": {"mean": round6(sum(ttft) / len(ttft)) if ttft else None, **percentiles(ttft)},
        "itl_ms": percentiles(result.itl_ms),
        "itl_quantiles_ms": quantiles(result.itl_ms),
        "launches": {**result.launch_counts, "total": result.launch_count},
        "padded_prefill_tokens": result.padded_prefill_tokens,
        "padded_prefill_ms": round6(result.padded_prefill_ms),
        "padded_decode_rows": result.padded_decode_rows,
        "end_ms": round6(result.end_ms),
        "load": saturation.judge(
            [a.arrival_ms for a in arrivals], [lane.first_token_at_ms for lane in result.lanes]
        ).to_dict(),
        "per_request": [
            {
                "id": lane.id,
                "arrival_ms": round6(lane.arrival_ms),
                "prompt_tokens": prompts[lane.id].request.prompt_tokens,
                "output_tokens": lane.tokens,
                "ttft_ms": round6(lane.ttft_ms),
                "finish_ms": round6(lane.finish_ms),
                "prefill_launches": len(lane.chunks),
                "max_itl_ms": round6(lane.max_itl_ms),
            }
            for lane in result.lanes
        ],
    }


def format_text(result: SimulateResult, pair: Pair | None = None) -> str:
    """One line per policy: TTFT and ITL percentiles, launches, padding, or the stall; then
    `pair`'s deltas (by default the first two policies')."""
    source = result["traffic"]
    origin = f"trace {source['name']} x{source['time_scale']:g}" if source["source"] == "trace" else "Poisson"
    lines = [f"{result['requests']} requests ({origin}), {result['catalog']} catalog"]
    for p in result["policies"]:
        if p["stalled"]:
            lines.append(
                f"{p['policy']:<8} STALLED request {p['stalled']['request']} at position "
                f"{p['stalled']['position']} ({p['finished']} finished)"
            )
            continue
        t, i = p["ttft_ms"], p["itl_ms"]
        lines.append(
            f"{p['policy']:<8} ttft p50 {t['p50']:.2f} p99 {t['p99']:.2f} ms  itl p50 {i['p50'] or 0:.2f} "
            f"p99 {i['p99'] or 0:.2f} ms  launches {p['launches']['total']}  "
            f"padding {p['padded_prefill_tokens']} tokens, {p['padded_decode_rows']} rows"
        )
        if p.get("load"):  # absent from results older than the verdict
            lines.append(f"{'':<8} {saturation.Load(**p['load']).describe()}")
    lines += delta_lines(picked_deltas(result, pair))
    return "\n".join(lines)


def picked_deltas(result: Any, pair: Pair | None) -> dict[str, Any] | None:
    """`pair`'s per-request comparison from a result's rows, else the one it stored (its first two)."""
    return request_deltas(result["policies"], pair) if pair else result.get("deltas")


def delta_lines(d: dict[str, Any] | None) -> list[str]:
    """after - before as both deltas, each named, and what an overloaded run makes of them."""
    if not d or not d["requests"]:
        return []
    label = d["label"]
    lines = []
    if d.get("queueing"):
        lines.append(f"CAUTION: an overloaded run: {saturation.QUEUEING}; {label} below compares queues")
    lines.append(
        f"{label}, {PERCENTILE_OF_DIFFERENCES}: p50 {d['p50']:+.2f} p99 {d['p99']:+.2f} ms, max {d['max']:+.2f} ms; "
        f"{d['after']} slower for {d['share_after_slower']:.1%}, faster for {d['share_after_faster']:.1%}"
    )
    diff = d.get("difference_of_percentiles")
    if diff and diff["p50"] is not None:
        lines.append(f"{label}, {DIFFERENCE_OF_PERCENTILES}: p50 {diff['p50']:+.2f} p99 {diff['p99']:+.2f} ms")
    return lines


ANALYSIS = Analysis(
    name="simulate",
    summary="Poisson or trace traffic through the multi-lane scheduler: TTFT, inter-token latency, launches and "
    "padding per policy, and its first two policies compared per request (after - before).",
    params=(
        IntParam("requests", 200, "requests in the traffic", minimum=1, maximum=20_000),
        FloatParam("rate_per_s", 10.0, "mean arrivals per second (Poisson)", minimum=0.001, maximum=1e5),
        *poisson_params(prompt_max=16_000, output_min=16, output_max=256),
        PolicyListParam("policies", help="policies to compare on the same traffic", every_policy=True),
        ChoiceParam(
            "catalog",
            "clean",
            "the measured catalog: clean, drift (full chunk over-measured), or unmeasured-full",
            choices=CATALOGS,
        ),
        DRIFT_PARAM,
        EXECUTION_PROFILE,
        *EXECUTION_PARAMS,
        *TRACE_PARAMS,
        IntListParam(
            "mixed_rows",
            [8, 32],
            "decode rows of the mixed graphs captured for each prefill capacity",
            minimum=1,
            maximum=MAX_LANES,
            max_items=len(DECODE_ROWS),
        ),
        IntParam("max_lanes", 32, "most requests admitted at once", minimum=1, maximum=MAX_LANES),
        IntParam(
            "max_decode_wait", 2, "most launches a decoding lane may sit out between tokens", minimum=1, maximum=64
        ),
        CatalogParam(
            "boot_catalog",
            None,
            "a measured boot with decode graphs (a gpu_runner capture with graphs "
            "'all') as the catalog and the true costs, instead of catalog/mixed_rows/execution",
        ),
        IntParam(
            "launch_events",
            200,
            "launch events emitted at the start of each policy's run (the lanes timeline draws them)",
            minimum=0,
            maximum=1000,
        ),
    ),
    run=run,
    only_with=TRACE_ONLY,
    schema_rules=(boot_or_profile_schema("boot_catalog"),),
    check=check,
    work=work,
    max_work=10_000_000,
    format_text=format_text,
    pair_text=format_text,
    result=SimulateResult,
    events=(ProgressEvent, StepLaunchEvent, PolicyResultEvent),
    example={"requests": 12, "prompt_max": 6000, "output_min": 4, "output_max": 12, "launch_events": 30},
)
SHARED = {p.name: p for p in ANALYSIS.params}  # declared once here; capacity and replay take theirs by name
SETTING = (  # the catalog, its execution model and the loop's bounds: what a run on this model is set on
    "catalog",
    "drift_factor",
    "execution",
    "fixed_ms",
    "ms_per_token",
    "first_token_ms",
    "mixed_rows",
    "max_lanes",
    "max_decode_wait",
)
