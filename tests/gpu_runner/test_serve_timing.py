"""Timing as a serve sees it: each plan's launch sequence timed as it runs (its shapes mixed, in
order), its copies beside its launches, and TTFT's error split into the device, the host copies and
the rest. On CPU the clock is the host's; the same code reads CUDA events on a GPU."""

from __future__ import annotations

import pytest

from gpu_runner.analyses import ANALYSES
from gpu_runner.execute import execute, prompt_tokens
from scheduler_core.catalog import catalog_from_mapping
from scheduler_core.planner import plan
from scheduler_core.request import Request


def test_a_plans_sequence_is_timed_as_it_ran_with_its_copies_and_idle_time(boot):
    chosen = plan("cost", catalog_from_mapping({16: 1.0, 32: 1.5, 64: 2.5}), Request(150))
    run = execute(boot, chosen, prompt_tokens(boot, 150, seed=3))
    assert len(run.launch_ms) == len(chosen.launches) and len({l.graph for l in chosen.launches}) > 1
    assert len(run.copy_ms) == len(chosen.launches) + 1  # each chunk's load, then the first token's copy
    assert run.sequence_ms >= sum(run.launch_ms) + sum(run.copy_ms) - 1e-6 and run.device_idle_ms >= -1e-6
    assert run.ttft_ms >= run.sequence_ms - 1e-6


def test_ttft_reports_each_arms_sequence_and_splits_its_error_into_device_host_copies_and_the_rest():
    ttft = ANALYSES["ttft"]
    params = {"device": "cpu", "capacities": [16, 32], "repeats": 1, "prompt_tokens": [60], "runs": 1}
    result = ttft.run(ttft.validate(params), lambda e: None)
    assert len(result["sequences"]) == len(result["arms"]) == 2
    for arm, sequence in zip(result["arms"], result["sequences"]):
        assert (sequence["prompt_tokens"], sequence["policy"]) == (arm["prompt_tokens"], arm["policy"])
        assert sequence["graphs"] == arm["graphs"] and sequence["ttft_ms"] == arm["ttft_ms"]
        rows = {r["source"]: r for r in arm["errors"]}
        assert rows["host copies"]["ms"] == pytest.approx(sequence["copies_ms"])
        device = sum(r["ms"] for r in arm["errors"] if r["group"] == "device")
        assert device == pytest.approx(arm["launch_sum_ms"] - arm["predicted_ms"])
        assert sum(r["ms"] for r in arm["errors"]) == pytest.approx(arm["ttft_ms"] - arm["predicted_ms"])
