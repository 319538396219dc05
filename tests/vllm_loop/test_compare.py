"""The real engine's requests beside the simulator's: the simulated traffic is what was sent."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_core.execution import NO_ATTENTION_TERM
from vllm_loop import compare
from vllm_loop.driver import Served


def served(i: int, sent_ms: float, prompt: int, ttft: float | None, output: int = 1) -> Served:
    return Served(i, sent_ms, sent_ms, prompt, output, ttft, (), ttft, "" if ttft is not None else "HTTP 500")


def test_lone_requests_the_table_explains_have_no_error(table: list[dict[str, Any]]) -> None:
    # Far apart, one output token: each is alone; 1,024 tokens is one step, 3,000 two (2,048 + 952 -> 960).
    lone = [served(0, 0.0, 1024, 9.0 + 4.0 + 10.24), served(1, 10_000.0, 3000, 9.0 + 8.0 + 0.01 * (2048 + 960))]
    result = compare.compare(lone, compare.simulate(lone, table, "rule", 2048, 9.0))
    assert result["requests"] == 2
    assert result["percentile_error_pct"]["p50"] == pytest.approx(0.0, abs=1e-3)
    assert result["request_error_pct"]["p99"] == pytest.approx(0.0, abs=1e-3)
    assert result["per_request"][1]["sim_chunks"] == [2048, 952]
    assert result["sim_padded_tokens"] == 8


def test_the_error_is_signed_simulated_against_real(table: list[dict[str, Any]]) -> None:
    slow = [served(0, 0.0, 1024, 2 * (9.0 + 4.0 + 10.24))]
    result = compare.compare(slow, compare.simulate(slow, table, "rule", 2048, 9.0))
    assert result["percentile_error_pct"]["p50"] == pytest.approx(-50.0, abs=1e-3)
    assert result["request_error_pct"]["p50"] == pytest.approx(50.0, abs=1e-3)


def test_failed_requests_are_counted_not_compared(table: list[dict[str, Any]]) -> None:
    rows = [served(0, 0.0, 64, 13.64), served(1, 50.0, 64, None)]
    result = compare.compare(rows, compare.simulate(rows, table, "rule", 2048, 9.0))
    assert (result["requests"], result["failed"]) == (1, 1)


def test_the_request_cost_runs_beside_the_engine_not_on_it(table: list[dict[str, Any]]) -> None:
    """Two requests at once share one step (vLLM fills its 2,048-token budget with both), and
    neither waits for the other's API overhead."""
    both = [served(0, 0.0, 1024, 1.0), served(1, 0.0, 1024, 1.0)]
    sim = compare.simulate(both, table, "rule", 2048, 9.0)
    step = 4.0 + 20.48
    assert sim[0]["ttft_ms"] == pytest.approx(9.0 + step)
    assert sim[1]["ttft_ms"] == pytest.approx(9.0 + step)


def test_on_an_engine_that_pads_nothing_a_tail_is_costed_at_its_own_size(table: list[dict[str, Any]]) -> None:
    """A CPU runs 3,000 tokens as 2,048 + 952, and the simulator then costs the tail as 952 tokens
    (on the line between the 896 and 960 graphs), not as the 960-token graph."""
    lone = [served(0, 0.0, 3000, 9.0 + 8.0 + 0.01 * 3000)]
    result = compare.compare(lone, compare.simulate(lone, table, "rule", 2048, 9.0, pads=False))
    assert result["percentile_error_pct"]["p50"] == pytest.approx(0.0, abs=1e-3)
    assert result["per_request"][0]["sim_chunks"] == [2048, 952]
    assert result["sim_padded_tokens"] == 0


def launch(start: int, end: int, ms: float) -> dict[str, object]:
    return {"start": start, "end": end, "graph": end - start, "ms": ms}


def test_the_breakdown_splits_a_ttft_into_outside_waiting_and_steps_against_the_model(
    table: list[dict[str, Any]],
) -> None:
    """Request 0: client 40 ms, engine 30 ms, one 1,024-token step of 2x the model's time; request 1:
    client 100, engine 60, two steps at the model's time (2,048 + 952 tokens on a CPU)."""
    execution, catalog = compare.engine_model(table, NO_ATTENTION_TERM, pads=False)
    step_1024, step_2048, step_952 = 4.0 + 10.24, 4.0 + 20.48, 4.0 + 9.52
    rows = [served(0, 0.0, 1024, 40.0), served(1, 10_000.0, 3000, 100.0), served(2, 20_000.0, 64, None)]
    launched = {
        0: [launch(0, 1024, 2 * step_1024)],
        1: [launch(0, 2048, step_2048), launch(2048, 3000, step_952)],
    }
    got = compare.breakdown(rows, {0: 30.0, 1: 60.0}, launched, execution, catalog)
    assert got["requests"] == 2
    assert (got["outside_ms"]["p50"], got["outside_ms"]["p90"]) == (10.0, 40.0)
    assert got["engine_wait_ms"]["p90"] == pytest.approx(max(30.0 - 2 * step_1024, 60.0 - step_2048 - step_952))
    assert got["step_over_model"]["p50"] == pytest.approx(1.0)
    assert got["step_over_model"]["p99"] == pytest.approx(2.0)


def test_the_engine_against_itself_compares_the_requests_both_passes_served() -> None:
    # request 2 failed the second time: it is left out of both sides, not read as a 100 % change
    first = {0: 100.0, 1: 200.0, 2: 300.0}
    again = {0: 110.0, 1: 180.0}
    result = compare.repeatability(first, again)
    assert result["requests"] == 2
    assert result["request_diff_pct"]["p50"] == pytest.approx(10.0)  # +10 % and -10 %, each 10 % away
    assert (result["first_ttft_ms"]["p99"], result["again_ttft_ms"]["p99"]) == (200.0, 180.0)
    assert compare.repeatability(first, {})["percentile_diff_pct"]["p50"] is None
