"""From a real vLLM's measured TTFT and decode gaps to the table the simulator runs on."""

from __future__ import annotations

import pytest

from scheduler_core.catalog import MAX_GRAPHS, Catalog
from vllm_loop import calibrate


def engine_ttft(n: int, budget: int = 2048, square: float = 0.0) -> float:
    """A made-up engine: 9 ms per request, 4 ms per step, 0.01 ms per prompt token, and `square`
    ms per token squared within each step (attention within the chunk)."""
    chunks = calibrate.chunks(n, budget)
    return 9.0 + 4.0 * len(chunks) + 0.01 * n + square * sum(c * c for c in chunks)


def test_the_fit_separates_the_request_cost_from_the_step_cost() -> None:
    ttft = [(n, engine_ttft(n)) for n in (16, 512, 2048, 3000, 4096, 6000)]
    itl = [(k, 3.0 + 0.25 * k) for k in (1, 4, 16)]
    costs = calibrate.fit(ttft, itl, 2048)
    assert costs.request_ms == pytest.approx(9.0)
    assert costs.step_ms == pytest.approx(4.0)
    assert costs.prefill_ms_per_token == pytest.approx(0.01)
    assert costs.prefill_ms_per_token2 == pytest.approx(0.0, abs=1e-9)
    assert costs.decode_step_ms == pytest.approx(3.0)
    assert costs.decode_ms_per_row == pytest.approx(0.25)
    assert costs.prefill_residual_ms == pytest.approx(0.0, abs=1e-6)


def test_attention_within_a_chunk_is_the_square_term() -> None:
    ttft = [(n, engine_ttft(n, square=1e-4)) for n in (16, 512, 1024, 2048, 3000, 4096)]
    costs = calibrate.fit(ttft, [(1, 3.0), (4, 4.0)], 2048)
    assert costs.prefill_ms_per_token2 == pytest.approx(1e-4)
    assert costs.prefill(1024) == pytest.approx(4.0 + 10.24 + 1e-4 * 1024**2)


def test_lengths_within_one_step_cannot_separate_request_and_step() -> None:
    with pytest.raises(ValueError, match="cannot separate"):
        calibrate.fit([(16, 10.0), (512, 15.0), (1024, 20.0)], [(1, 3.0), (4, 4.0)], 2048)


def test_the_table_is_a_catalog_scheduler_core_reads_and_fits_its_bound() -> None:
    costs = calibrate.fit([(n, engine_ttft(n)) for n in (16, 1024, 2048, 4096)], [(1, 3.0), (16, 7.0)], 2048)
    granularity = calibrate.finest_granularity(2048)
    rows = calibrate.table(costs, 2048, granularity)
    catalog = Catalog.from_dicts(rows)
    assert len(rows) <= MAX_GRAPHS
    assert catalog.full_chunk == 2048
    assert catalog.capacities[0] == granularity
    assert {g.shape: g.ms for g in catalog.graphs}[(2048, 0)] == pytest.approx(4.0 + 0.01 * 2048)
    assert (0, 0) not in {g.shape for g in catalog.graphs}  # the request's own cost runs beside the engine


def test_a_granularity_too_fine_is_refused_by_name() -> None:
    costs = calibrate.fit([(n, engine_ttft(n)) for n in (16, 1024, 2048, 4096)], [(1, 3.0), (16, 7.0)], 2048)
    with pytest.raises(ValueError, match="coarser"):
        calibrate.table(costs, 2048, 8)
