"""Traffic through the multi-lane scheduler, per policy: what a maintainer sees of a policy under
load (time to first token, inter-token latency, launches, padding), not just for one lone prompt.

Arrivals are Poisson; prompt lengths are log-uniform (short chats and long documents alike);
output lengths uniform. The same seeded traffic runs under every chosen policy. `rule-v1` may be
chosen: with spans in the traffic and an unmeasured full chunk it shows the stall, reported with
its request and position."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from ..catalog import DEFAULT_PREFILL_CAPACITIES, Catalog, drift, unmeasured
from ..engine import TrafficShape, poisson_arrivals
from ..errors import InvalidInput
from ..events import PolicyResultEvent, ProgressEvent, StepLaunchEvent
from ..execution import AffineExecution, ExecutionModel, TableExecution, measured_catalog
from ..limits import MAX_TOKENS
from ..scheduler import Arrival, SchedulerConfig, ScheduleResult, schedule
from .catalogs import CATALOG_NAMES, DRIFT_PARAM, EXECUTION_PARAMS, execution_dict, execution_of
from .pacing import Ticker
from .params import (
    Analysis,
    CatalogParam,
    ChoiceParam,
    Emit,
    FloatParam,
    IntListParam,
    IntParam,
    PolicyListParam,
)

DECODE_ROWS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
MAX_LANES = DECODE_ROWS[-1]
CATALOGS: tuple[str, ...] = CATALOG_NAMES + ("unmeasured-full",)
PERCENTILES: tuple[int, ...] = (50, 90, 99)
TRAFFIC_FIELDS: tuple[str, ...] = tuple(TrafficShape.__dataclass_fields__)


def check(params: dict[str, Any]) -> None:
    """Length ranges the right way round; a boot carries traffic only with decode graphs, and no
    more lanes than its largest one has rows."""
    for low, high in (("prompt_min", "prompt_max"), ("output_min", "output_max")):
        if params[low] > params[high]:
            raise InvalidInput(low, f"must be <= {high} ({params[low]} > {params[high]})")
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
    per_request = (params["output_min"] + params["output_max"]) // 2 + params["prompt_max"] // 1024 + 2
    return int(params["requests"] * len(params["policies"]) * per_request)


def traffic(params: dict[str, Any], full_chunk: int) -> list[Arrival]:
    """Seeded arrivals; with probability `span_share` a request holds one atomic span (a tool
    result or an image) no longer than the full chunk. The engine job runs the same stream, endless."""
    shape = TrafficShape(**{f: params[f] for f in TRAFFIC_FIELDS})
    return list(itertools.islice(poisson_arrivals(shape, full_chunk), params["requests"]))


def build_catalog(params: dict[str, Any], execution: AffineExecution) -> Catalog:
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


def run(params: dict[str, Any], emit: Emit) -> dict[str, Any]:
    execution: ExecutionModel
    if params["boot_catalog"] is not None:
        execution, catalog, init = boot_setting(params)
        catalog_name, execution_description = "boot", {**execution_dict(execution), "init": init}
    else:
        affine = execution_of(params)
        execution, catalog = affine, build_catalog(params, affine)
        catalog_name, execution_description = params["catalog"], execution_dict(execution)
    arrivals = traffic(params, catalog.full_chunk)
    n = len(arrivals)
    ticker = Ticker(emit, n * len(params["policies"]))
    policies = []
    for i, name in enumerate(params["policies"]):

        def on_progress(finished: int, launches: int, before: int = i * n, name: str = name) -> None:
            ticker.tick(before + finished, f"{name}: {finished}/{n} requests, {launches} launches")

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
        "requests": n,
        "offered_ms": round(arrivals[-1].arrival_ms, 6) if arrivals else 0.0,
        "policies": policies,
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
        "ttft_ms": {"mean": _round(sum(ttft) / len(ttft)) if ttft else None, **_percentiles(ttft)},
        "itl_ms": _percentiles(result.itl_ms),
        "itl_quantiles_ms": _quantiles(result.itl_ms),
        "launches": {**result.launch_counts, "total": result.launches},
        "padded_prefill_tokens": result.padded_prefill_tokens,
        "padded_decode_rows": result.padded_decode_rows,
        "end_ms": _round(result.end_ms),
        "per_request": [
            {
                "id": lane.id,
                "arrival_ms": _round(lane.arrival_ms),
                "prompt_tokens": prompts[lane.id].request.prompt_tokens,
                "output_tokens": lane.tokens,
                "ttft_ms": _round(lane.ttft_ms),
                "finish_ms": _round(lane.finish_ms),
                "prefill_launches": len(lane.chunks),
                "max_itl_ms": _round(lane.max_itl_ms),
            }
            for lane in result.lanes
        ],
    }


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """Nearest-rank percentiles and the maximum; None for an empty sample."""
    ordered = sorted(values)
    if not ordered:
        return {**{f"p{q}": None for q in PERCENTILES}, "max": None}
    rank = {f"p{q}": _round(ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]) for q in PERCENTILES}
    return {**rank, "max": _round(ordered[-1])}


def _quantiles(values: Sequence[float], steps: int = 100) -> list[float]:
    """The distribution in `steps + 1` nearest-rank quantiles (0 %, 1 %, ... 100 %): a CDF of any
    sample size in a fixed number of points; empty for an empty sample."""
    ordered = sorted(values)
    if not ordered:
        return []
    return [
        _round(ordered[min(len(ordered) - 1, max(0, math.ceil(q / steps * len(ordered)) - 1))])
        for q in range(steps + 1)
    ]


def _round(x: float) -> float:
    return round(x, 6)


def format_text(result: dict[str, Any]) -> str:
    """One line per policy: TTFT and ITL percentiles, launches, padding, or the stall."""
    lines = [f"{result['requests']} requests, {result['catalog']} catalog"]
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
    return "\n".join(lines)


ANALYSIS = Analysis(
    name="simulate",
    summary="Poisson traffic through the multi-lane scheduler: TTFT, inter-token latency, launches and padding per policy.",
    params=(
        IntParam("requests", 200, "requests in the traffic", minimum=1, maximum=20_000),
        FloatParam("rate_per_s", 10.0, "mean arrivals per second (Poisson)", minimum=0.001, maximum=1e5),
        IntParam("prompt_min", 32, "shortest prompt (tokens; lengths are log-uniform)", minimum=1, maximum=MAX_TOKENS),
        IntParam("prompt_max", 16_000, "longest prompt (tokens)", minimum=1, maximum=MAX_TOKENS),
        IntParam("output_min", 16, "fewest output tokens (lengths are uniform)", minimum=1, maximum=100_000),
        IntParam("output_max", 256, "most output tokens", minimum=1, maximum=100_000),
        FloatParam("span_share", 0.0, "share of requests holding one atomic span", minimum=0.0, maximum=1.0),
        IntParam("seed", 0, "traffic seed", minimum=0, maximum=2**31 - 1),
        PolicyListParam("policies", help="policies to compare on the same traffic", every_policy=True),
        ChoiceParam(
            "catalog",
            "clean",
            "the measured catalog: clean, drift (full chunk over-measured), or unmeasured-full",
            choices=CATALOGS,
        ),
        DRIFT_PARAM,
        *EXECUTION_PARAMS,
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
            "max_decode_wait",
            2,
            "most launches a decoding lane may sit out between tokens",
            minimum=1,
            maximum=64,
        ),
        CatalogParam(
            "boot_catalog",
            None,
            "a measured boot with decode graphs (a gpu_runner capture with graphs "
            "'all') as the catalog and the true costs, instead of catalog/mixed_rows/execution",
        ),
        IntParam(
            "launch_events",
            20,
            "launch events emitted at the start of each policy's run",
            minimum=0,
            maximum=1000,
        ),
    ),
    run=run,
    check=check,
    work=work,
    max_work=10_000_000,
    format_text=format_text,
    events=(ProgressEvent, StepLaunchEvent, PolicyResultEvent),
)
