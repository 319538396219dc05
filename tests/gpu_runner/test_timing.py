"""How a shape is timed: warm-up launches run untimed before the samples, and the static buffers
hold seeded random token ids, drawn as TTFT's prompts are."""

from __future__ import annotations

import types
from collections import Counter

import pytest
import torch

from gpu_runner import timing
from gpu_runner.capture import capture_boot, load_timing_tokens, time_launches
from gpu_runner.events import Progress
from gpu_runner.execute import prompt_tokens
from gpu_runner.graphs import Launcher
from scheduler_core.analyses.params import ignore_events

from .conftest import small_context


class ColdThenWarm:
    """A launcher on a fake clock: its first launches take 5 s (cold), later ones 2 ms."""

    def __init__(self, clock: list[float], cold: int) -> None:
        self.clock, self.cold, self.calls = clock, cold, 0

    def launch(self) -> None:
        self.clock[0] += 5.0 if self.calls < self.cold else 0.002
        self.calls += 1


@pytest.fixture
def fake_clock(monkeypatch) -> list[float]:
    clock = [0.0]
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    return clock


@pytest.mark.parametrize("warmup", [3, 1])
def test_warm_up_launches_run_first_and_are_not_among_the_samples(fake_clock, warmup):
    launcher = ColdThenWarm(fake_clock, cold=warmup)
    samples = time_launches(launcher, torch.device("cpu"), repeats=4, warmup=warmup)
    assert launcher.calls == warmup + 4
    assert samples == pytest.approx([2.0] * 4)  # no 5-second cold launch among them


def test_without_warm_up_the_first_launch_is_a_sample(fake_clock):
    samples = time_launches(ColdThenWarm(fake_clock, cold=1), torch.device("cpu"), repeats=3, warmup=0)
    assert samples == pytest.approx([5000.0, 2.0, 2.0])


def test_timing_runs_seeded_random_token_ids_not_zeros(boot):
    for shape in [(64, 0), (16, 2)]:
        load_timing_tokens(boot, shape, seed=4)
        tokens = boot.launchers[shape].step.tokens
        assert torch.equal(tokens, prompt_tokens(boot, sum(shape), seed=4))  # TTFT's distribution and seeding
        assert len(set(tokens.tolist())) > sum(shape) // 2  # varied rows, not one id repeated


def test_a_capture_launches_each_shape_warmup_plus_repeats_times_and_samples_only_the_repeats(monkeypatch):
    """The real capture path (one boot in process): W untimed launches, K samples, per shape; the
    boot's fingerprint adds one launch of the first shape."""
    calls: Counter[tuple[int, int]] = Counter()
    real = Launcher.launch

    def counted(self: Launcher) -> torch.Tensor:
        calls[(self.step.prefill, self.step.decode)] += 1
        return real(self)

    monkeypatch.setattr(Launcher, "launch", counted)
    shapes = [(16, 0), (32, 0), (0, 2)]
    _, stored = capture_boot(
        small_context(), torch.device("cpu"), shapes, repeats=4, warmup=2, seed=0, steps=Progress(ignore_events, 4)
    )
    assert calls == {(16, 0): 1 + 2 + 4 + 1, (32, 0): 1 + 2 + 4, (0, 2): 1 + 2 + 4}  # build, warm-up, samples
    assert [(m["samples"], m["warmup"]) for m in stored["measurements"]] == [(4, 2)] * 3
