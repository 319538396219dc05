"""The trace driver's prompts: the same ids for the same request on every run (a replay under
another policy sees the same prompt), never a special token, and clipped to the model's context."""

from __future__ import annotations

from scheduler_core.request import Request
from scheduler_core.scheduler import Arrival
from vllm_loop import driver


def test_a_request_gets_the_same_ids_on_every_run_and_no_special_token() -> None:
    ids = driver.prompt_ids(7, 500, 32_000)
    assert ids == driver.prompt_ids(7, 500, 32_000) != driver.prompt_ids(8, 500, 32_000)
    assert len(ids) == 500 and min(ids) >= driver.FIRST_ID and max(ids) < 32_000


def test_a_prompt_is_clipped_to_the_context_less_its_output() -> None:
    assert driver.clip(Arrival(0, 0.0, Request(7437), 10), 8192) == (7437, 10)
    assert driver.clip(Arrival(0, 0.0, Request(8190), 10), 8192) == (8182, 10)
    assert driver.clip(Arrival(0, 0.0, Request(100), 9000), 8192) == (1, 8191)
