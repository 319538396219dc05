"""The token-budget loop serves as vLLM's v1 scheduler does: running requests first, then waiting
ones, each step filled to its budget; a lone prefilling request chunked by its policy."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler_core.catalog import build_catalog
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import AffineExecution, AttentionTerm
from scheduler_core.policies import selectable_policies
from scheduler_core.request import Request
from scheduler_core.scheduler import Arrival, SchedulerConfig, schedule
from scheduler_core.token_budget import BUDGET_CHOOSER, schedule_budget

EXECUTION = AffineExecution(fixed_ms=2.0, ms_per_token=1 / 64, first_token_ms=0.0)
CAPACITIES = (64, 128, 256, 512, 1024, 2048)
ROWS = (1, 2, 4, 8)


def cpu_catalog(execution: AffineExecution = EXECUTION):  # type: ignore[no-untyped-def]
    """Solo, decode and mixed graphs measured at their true cost, on an engine that pads nothing."""
    mixed = [(c, d) for c in CAPACITIES for d in ROWS]
    catalog = build_catalog(execution.launch_ms, capacities=CAPACITIES, decode_rows=ROWS, mixed=mixed)
    return dataclasses.replace(catalog, pads=False)


def arrival(i: int, at_ms: float, prompt: int, output: int = 1) -> Arrival:
    return Arrival(i, at_ms, Request(prompt), output)


def spans(outcome) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    return [(c.start, c.end) for c in outcome.chunks]


def test_two_prompts_arriving_together_are_prefilled_in_one_step() -> None:
    a, b = schedule_budget([arrival(0, 0.0, 1000), arrival(1, 0.0, 300)], cpu_catalog(), EXECUTION, "rule", 2048, 8)
    step = EXECUTION.launch_ms(1300)
    assert (a.ttft_ms, b.ttft_ms) == (pytest.approx(step), pytest.approx(step))
    assert (spans(a), spans(b)) == ([(0, 1000)], [(0, 300)])
    assert {c.chooser for c in a.chunks + b.chunks} == {BUDGET_CHOOSER}


def test_a_running_prefill_goes_first_and_a_waiting_one_takes_what_is_left() -> None:
    """A (3,000 tokens) alone takes the rule's full 2,048 chunk; B arrives during it; the next step
    carries A's last 952 tokens, then B's first 1,096; B, alone after it, its last 104 as planned."""
    a, b = schedule_budget([arrival(0, 0.0, 3000), arrival(1, 1.0, 1200)], cpu_catalog(), EXECUTION, "rule", 2048, 8)
    assert spans(a) == [(0, 2048), (2048, 3000)]
    assert spans(b) == [(0, 1096), (1096, 1200)]
    assert [c.chooser for c in a.chunks + b.chunks] == ["rule", BUDGET_CHOOSER, BUDGET_CHOOSER, "rule"]
    first, second = EXECUTION.launch_ms(2048), EXECUTION.launch_ms(2048)
    assert a.ttft_ms == pytest.approx(first + second)
    assert b.first_token_at_ms == pytest.approx(first + second + EXECUTION.launch_ms(104))


def test_decoding_requests_ride_in_every_step_and_take_from_its_budget() -> None:
    """A decodes; B's 2,048-token prompt then runs as 2,047 tokens beside A's row, and 1 after."""
    a, b = schedule_budget(
        [arrival(0, 0.0, 64, output=10), arrival(1, 1.0, 2048)], cpu_catalog(), EXECUTION, "rule", 2048, 8
    )
    assert spans(b) == [(0, 2047), (2047, 2048)]
    assert spans(a) == [(0, 64)]


@pytest.mark.parametrize("policy", selectable_policies())
def test_a_lone_request_is_chunked_as_the_step_loop_plans_it(policy: str) -> None:
    """Alone in the engine, each chunk is its policy's: the same as `StepLoop`'s solo prefill."""
    catalog = cpu_catalog()
    lone = [arrival(0, 0.0, 5000)]
    (budget,) = schedule_budget(lone, catalog, EXECUTION, policy, 2048, 8)
    (loop,) = schedule(lone, catalog, EXECUTION, SchedulerConfig(policy)).lanes
    assert spans(budget) == [(c.start, c.end) for c in loop.chunks]
    assert budget.ttft_ms == pytest.approx(loop.ttft_ms - EXECUTION.launch_ms(0))  # vLLM has no init launch


def test_a_step_of_two_chunks_attends_each_requests_own_cached_keys() -> None:
    """A's second chunk (952 tokens after 2,048 cached) beside B's first (1,096 after none): the
    step attends 952 x 2,048 cached keys, as one chunk at their token-weighted position."""
    execution = dataclasses.replace(EXECUTION, attention=AttentionTerm(prefill_key_ms=1e-6))
    a, _ = schedule_budget([arrival(0, 0.0, 3000), arrival(1, 1.0, 1200)], cpu_catalog(), execution, "rule", 2048, 8)
    first = execution.launch_ms(2048)
    second = EXECUTION.launch_ms(2048) + 952 * 2048 * 1e-6
    assert a.ttft_ms == pytest.approx(first + second, rel=1e-4)


def test_it_rejects_more_lanes_than_the_catalog_has_decode_rows() -> None:
    with pytest.raises(InvalidInput, match="max_lanes"):
        schedule_budget([arrival(0, 0.0, 64)], cpu_catalog(), EXECUTION, "rule", 2048, 9)


def test_it_rejects_an_empty_budget() -> None:
    with pytest.raises(InvalidInput, match="budget"):
        schedule_budget([arrival(0, 0.0, 64)], cpu_catalog(), EXECUTION, "rule", 0, 8)
