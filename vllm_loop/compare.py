"""The real engine's requests beside the simulator's, request by request.

The simulated traffic is what the real engine was sent: each request at the moment the driver sent
it (not when the trace asked: a driver out of slots sends late), or, against the engine's own
TTFT, at the moment the engine received it (`check`), with the prompt and output lengths it really
had (clipped to the model's context). It runs through `scheduler_core`'s model of vLLM's
batching (`token_budget`: each step filled to the engine's token budget, a lone request chunked by
its policy, as the plugin does) on the table `calibrate` built from the same engine. TTFT error is given two ways, named apart: the error of each percentile
(simulated p50 against real p50), and percentiles of each request's own error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_core.analyses.simulate import boot_setting
from scheduler_core.catalog import Catalog
from scheduler_core.execution import NO_ATTENTION_TERM, AttentionTerm, TableExecution, unpadded_ms
from scheduler_core.request import Request
from scheduler_core.scheduler import Arrival
from scheduler_core.stats import percentiles
from scheduler_core.token_budget import schedule_budget

from .calibrate import MIXED_ROWS
from .driver import Served

QUANTILES = ("p50", "p90", "p99")


def engine_model(
    catalog_rows: list[dict[str, Any]], attention: AttentionTerm, pads: bool
) -> tuple[TableExecution, Catalog]:
    """The simulator's engine: the table's durations as the true costs, with the attention term,
    and the catalog it plans with (`pads`: whether a chunk runs padded to its graph)."""
    catalog = dataclasses.replace(Catalog.from_dicts(catalog_rows), pads=pads)
    execution, catalog, _ = boot_setting({"boot_catalog": catalog, "first_token_ms": 0.0})
    return dataclasses.replace(execution, attention=attention), catalog


def simulate(
    served: Sequence[Served],
    catalog_rows: list[dict[str, Any]],
    policy: str,
    budget: int,
    request_ms: float = 0.0,
    attention: AttentionTerm = NO_ATTENTION_TERM,
    pads: bool = True,
) -> dict[int, dict[str, Any]]:
    """Each served request's simulated TTFT and prefill chunks, by request id, each step filled to
    `budget` tokens (vLLM's `max_num_batched_tokens`); `request_ms` (what a request's TTFT holds
    outside the engine's steps, which `check` takes from lone prompts) added to each TTFT;
    `attention`: a chunk's cost growing with the tokens before it (scheduler_core's
    context-aware execution model), none by default; `pads`: whether the engine runs a chunk
    padded to its graph (False on a CPU: each chunk costed at its own size, no padding)."""
    execution, catalog = engine_model(catalog_rows, attention, pads)
    arrivals = [
        Arrival(s.id, s.sent_ms, Request(s.prompt_tokens), s.output_tokens) for s in served if s.ttft_ms is not None
    ]
    lanes = schedule_budget(arrivals, catalog, execution, policy, budget, max_lanes=MIXED_ROWS[-1])
    return {
        lane.id: {
            "ttft_ms": lane.ttft_ms + request_ms,
            "chunks": [c.end - c.start for c in lane.chunks],
            "spans": [(c.start, c.end) for c in lane.chunks],
            "graphs": [c.graph for c in lane.chunks],
            "padded": sum(c.padding for c in lane.chunks),
        }
        for lane in lanes
    }


def signed(pct: Mapping[str, float | None]) -> str:
    """Percent figures at each quantile, signed: `p50 +1.0 %, p90 -2.0 %, p99 +0.5 %`."""
    return ", ".join(f"{q} {pct[q] or 0:+.1f} %" for q in QUANTILES)


def _pct(sim: float | None, real: float | None) -> float | None:
    if sim is None or not real:
        return None
    return round(100.0 * (sim - real) / real, 3)


def compare(served: Sequence[Served], simulated: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """Per request (real and simulated TTFT, chunks) and the summary: the error of each TTFT
    percentile (`percentile_error_pct`), percentiles of per-request absolute error
    (`request_error_pct`), simulated padding."""
    rows = []
    for s in served:
        sim = simulated.get(s.id)
        if s.ttft_ms is None or sim is None:
            continue
        rows.append(
            {
                "id": s.id,
                "sent_ms": round(s.sent_ms, 3),
                "prompt_tokens": s.prompt_tokens,
                "output_tokens": s.output_tokens,
                "real_ttft_ms": round(s.ttft_ms, 3),
                "sim_ttft_ms": round(sim["ttft_ms"], 3),
                "error_pct": _pct(sim["ttft_ms"], s.ttft_ms),
                "sim_chunks": sim["chunks"],
                "sim_padded_tokens": sim["padded"],
            }
        )
    real = quantiles([r["real_ttft_ms"] for r in rows])
    sim = quantiles([r["sim_ttft_ms"] for r in rows])
    return {
        "requests": len(rows),
        "failed": sum(1 for s in served if s.ttft_ms is None),
        "real_ttft_ms": real,
        "sim_ttft_ms": sim,
        "percentile_error_pct": {q: _pct(sim[q], real[q]) for q in QUANTILES},
        "request_error_pct": quantiles([abs(r["error_pct"]) for r in rows if r["error_pct"] is not None]),
        "sim_padded_tokens": sum(r["sim_padded_tokens"] for r in rows),
        "sim_prefill_launches": sum(len(r["sim_chunks"]) for r in rows),
        "per_request": rows,
    }


def repeatability(first: Mapping[int, float], again: Mapping[int, float]) -> dict[str, Any]:
    """The engine against itself: each request's TTFT the second time the same window was served
    under the same policy, against the first (by request id; the requests both hold). Its figures
    are the host's own noise, which no simulator's error can be told from."""
    both = sorted(first.keys() & again.keys())
    a, b = quantiles([first[i] for i in both]), quantiles([again[i] for i in both])
    diffs = [_pct(again[i], first[i]) for i in both]
    return {
        "requests": len(both),
        "first_ttft_ms": a,
        "again_ttft_ms": b,
        "percentile_diff_pct": {q: _pct(b[q], a[q]) for q in QUANTILES},
        "request_diff_pct": quantiles([abs(d) for d in diffs if d is not None]),
    }


def launches(
    real: Mapping[int, Sequence[tuple[int, int]]], simulated: Mapping[int, Mapping[str, Any]]
) -> dict[str, int]:
    """The prefill launches vLLM ran (`real`: each request's chunk spans, from the plugin's launch
    records) beside the simulator's, for the requests both hold: how many each made, how many of
    either have no identical span in the other (`differ`), and in how many requests they differ."""
    counts = {"real": 0, "sim": 0, "differ": 0, "requests_differ": 0}
    for request, spans in real.items():
        sim = simulated.get(request)
        if sim is None:
            continue
        ran, planned = set(spans), set(sim["spans"])
        counts["real"] += len(spans)
        counts["sim"] += len(planned)
        counts["differ"] += len(ran ^ planned)
        counts["requests_differ"] += ran != planned
    return counts


def breakdown(
    served: Sequence[Served],
    engine_ttft: Mapping[int, float],
    launched: Mapping[int, Sequence[Mapping[str, Any]]],
    execution: TableExecution,
    catalog: Catalog,
) -> dict[str, Any]:
    """Where each real TTFT went, beside what the simulator charges for it: outside the engine
    (the client's TTFT less the engine's own, from the plugin's request record: HTTP, the API
    server, the hand-over to the engine core; the simulator's `request_ms`), inside it but not in
    the request's own steps (other requests' steps, the scheduler), and each of its prefill steps
    against the model's cost for the same chunk (`step_over_model`: 1 where the boot holds on the
    window; above it, the steps ran slower than the boot timed them, as on a contended host)."""
    outside, waits, ratios = [], [], []
    for s in served:
        chunks, engine = launched.get(s.id, ()), engine_ttft.get(s.id)
        if s.ttft_ms is None or engine is None or not chunks:
            continue
        outside.append(s.ttft_ms - engine)
        waits.append(max(0.0, engine - sum(c["ms"] for c in chunks)))
        ratios += step_over_model(chunks, execution, catalog)
    return {
        "requests": len(outside),
        "outside_ms": quantiles(outside),
        "engine_wait_ms": quantiles(waits),
        "step_over_model": quantiles(ratios),
    }


def step_over_model(chunks: Sequence[Mapping[str, Any]], execution: TableExecution, catalog: Catalog) -> list[float]:
    """Each launch record's step time over the model's cost for the same chunk (1: the boot holds)."""
    sizes = catalog.prefill_sizes()[0]
    return [
        c["ms"]
        / (
            execution.launch_ms(c["graph"], 0, c["start"])
            if catalog.pads
            else unpadded_ms(execution, sizes, c["end"] - c["start"], 0, c["start"])
        )
        for c in chunks
    ]


def quantiles(values: list[float]) -> dict[str, float | None]:
    got = percentiles(values)
    return {q: got[q] for q in QUANTILES}
