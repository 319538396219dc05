"""Against the engine's own TTFT, each request is simulated from the moment the engine received it
(the API server's way in can reorder two requests sent a millisecond apart), on decode steps fitted
to the engine's own gaps between tokens."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_loop import compare, probe
from vllm_loop.check import _as_the_engine_saw, _engine_gaps
from vllm_loop.driver import Served


def record(request: int, arrived_ms: float, ttft_ms: float, itl_ms: list[float]) -> dict:
    first = arrived_ms + ttft_ms
    return {
        "type": "request",
        "request": f"hc0x{request}",
        "t_ms": first + sum(itl_ms),
        "ttft_ms": ttft_ms,
        "itl_ms": itl_ms,
    }


def test_a_pair_the_api_server_reordered_is_simulated_in_the_engines_order(table: list[dict[str, Any]]) -> None:
    step = {1024: 4.0 + 10.24, 64: 4.0 + 0.64}
    # The client sent the long prompt first; the engine received the short one 0.5 ms before it,
    # ran it alone, then the long one: what the records say (Unix ms; the long one's end is a token
    # gap after its first token).
    sent = [Served(0, 0.0, 0.0, 1024, 2, 99.0, (), 99.0), Served(1, 1.0, 1.0, 64, 1, 99.0, (), 99.0)]
    engine = {
        1: record(1, 1_000_000.0, step[64], []),
        0: record(0, 1_000_000.5, step[64] - 0.5 + step[1024], [3.0]),
    }
    seen = _as_the_engine_saw(sent, engine)
    at_engine = compare.compare(seen, compare.simulate(seen, table, "rule", 2048, 0.0, pads=False))
    assert at_engine["requests"] == 2
    assert at_engine["request_error_pct"]["p99"] == pytest.approx(0.0, abs=1e-6)
    # Simulated in the client's order the short one would wait behind the long one's step.
    in_sent_order = compare.simulate(sent, table, "rule", 2048, 0.0, pads=False)
    assert in_sent_order[1]["ttft_ms"] > step[1024] > engine[1]["ttft_ms"]


def probe_record(rows: int, i: int, itl_ms: list[float]) -> dict:
    return {"type": "request", "request": f"cmpl-hcprobe{rows}x{i}-0", "t_ms": 0.0, "ttft_ms": 1.0, "itl_ms": itl_ms}


def test_decode_steps_are_fitted_on_the_engines_own_gaps_where_its_records_hold_them() -> None:
    """Each request decoding with `k` others: its first gaps skipped (the others still prefill),
    then the engine's step every 2 + 0.5 k ms."""
    records = [
        probe_record(k, i, [50.0] * probe.SKIPPED_GAPS + [2.0 + 0.5 * k] * 8) for k in probe.ROWS for i in range(k)
    ]
    assert _engine_gaps(records) == [[k, 2.0 + 0.5 * k] for k in probe.ROWS]
    # a row count short of one of its requests' records: none is used (the check fits the client's)
    assert _engine_gaps([r for r in records if r["request"] != "cmpl-hcprobe4x0-0"]) == []
