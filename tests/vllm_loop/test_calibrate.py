"""From a real vLLM's decode gaps and its boot to the table the simulator runs on."""

from __future__ import annotations

import pytest

from scheduler_core.catalog import Catalog
from vllm_loop import calibrate

SOLO = [{"prefill": 64, "decode": 0, "ms": 5.0}, {"prefill": 2048, "decode": 0, "ms": 90.0}]


def test_the_fit_separates_a_decode_steps_cost_from_each_rows() -> None:
    costs = calibrate.fit([(k, 3.0 + 0.25 * k) for k in (1, 4, 16)])
    assert costs.decode_step_ms == pytest.approx(3.0)
    assert costs.decode_ms_per_row == pytest.approx(0.25)
    assert costs.decode_residual_ms == pytest.approx(0.0, abs=1e-9)


def test_one_row_count_cannot_separate_step_and_row() -> None:
    with pytest.raises(ValueError, match="two row counts"):
        calibrate.fit([(4, 3.0), (4, 3.5)])


def test_the_table_holds_the_boots_solo_steps_and_each_with_decode_rows_riding() -> None:
    costs = calibrate.Costs(3.0, 0.25, 0.0)
    catalog = Catalog.from_dicts(calibrate.engine_table(SOLO, costs))
    ms = {g.shape: g.ms for g in catalog.graphs}
    assert ms[(2048, 0)] == 90.0  # the boot's, as timed inside the engine
    assert ms[(2048, 4)] == pytest.approx(90.0 + 4 * 0.25)
    assert ms[(0, 16)] == pytest.approx(3.0 + 16 * 0.25)
    assert {d for p, d in ms if p == 64} == {0, *calibrate.MIXED_ROWS}
    assert (0, 0) not in ms  # the request's own cost runs beside the engine
