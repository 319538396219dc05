"""How a shape is timed: warm-up launches run untimed before the samples, and the static buffers
hold seeded random token ids, drawn as TTFT's prompts are."""

from __future__ import annotations

import types
from collections import Counter

import pytest
import torch

from gpu_runner import timing
from gpu_runner.capture import (
    SETTLE_MAX_LAUNCHES,
    SETTLE_WINDOW,
    capture_boot,
    load_timing_tokens,
    settle,
    time_launches,
)
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
    """The real capture path (one boot in process): at least W untimed launches, then settling
    windows (recorded as the shape's `warmup`), then K samples, per shape; the boot's fingerprint
    adds one launch of the first shape."""
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
    warm = {(m["prefill"], m["decode"]): m["warmup"] for m in stored["measurements"]}
    assert calls == {s: 1 + warm[s] + 4 + (s == (16, 0)) for s in shapes}  # build, warm-up, samples, fingerprint
    assert all(w >= 2 + 2 * SETTLE_WINDOW for w in warm.values())  # the minimum, then at least two windows
    assert [m["samples"] for m in stored["measurements"]] == [4] * 3


class Settling:
    """A launcher on a fake clock whose launches take 9, 6, 4, 3, then 2 ms for good."""

    def __init__(self, clock: list[float]) -> None:
        self.clock, self.calls = clock, 0

    def launch(self) -> None:
        self.clock[0] += [0.009, 0.006, 0.004, 0.003][self.calls] if self.calls < 4 else 0.002
        self.calls += 1


def test_warm_up_runs_until_two_windows_agree_then_the_samples_are_settled(fake_clock):
    launcher = Settling(fake_clock)
    spent, settled = settle(launcher, torch.device("cpu"), minimum=1)
    # 1 minimum, then windows of 3: [6, 4, 3] ms, [2, 2, 2], [2, 2, 2] -> agree on the third
    assert (spent, settled) == (1 + 3 * SETTLE_WINDOW, True) and launcher.calls == spent
    assert time_launches(launcher, torch.device("cpu"), repeats=3, warmup=0) == pytest.approx([2.0] * 3)


def test_warm_up_that_never_settles_stops_at_its_bound(fake_clock):
    class Drifting:
        calls = 0

        def launch(self) -> None:
            self.calls += 1
            fake_clock[0] += 0.001 * 1.1**self.calls  # 10 % slower every launch: never settles

    launcher = Drifting()
    spent, settled = settle(launcher, torch.device("cpu"), minimum=2)
    assert not settled and spent - 2 >= SETTLE_MAX_LAUNCHES and spent - 2 < SETTLE_MAX_LAUNCHES + SETTLE_WINDOW


def test_shapes_are_measured_in_a_seeded_random_order_and_stored_in_catalog_order():
    shapes = [(16, 0), (32, 0), (64, 0), (0, 2), (16, 2)]
    orders = []
    for seed in (0, 0, 1):
        _, stored = capture_boot(
            small_context(),
            torch.device("cpu"),
            shapes,
            repeats=1,
            warmup=0,
            seed=seed,
            steps=Progress(ignore_events, 6),
        )
        assert [(m["prefill"], m["decode"]) for m in stored["measurements"]] == shapes
        orders.append(stored["provenance"]["order"])
    assert orders[0] == orders[1] != orders[2]  # the same seed, the same order
    assert sorted(orders[0]) == sorted(["prefill 16", "prefill 32", "prefill 64", "decode 2", "mixed 16+2"])
    assert orders[0] != ["prefill 16", "prefill 32", "prefill 64", "decode 2", "mixed 16+2"]
    assert stored["provenance"]["gpu_state"] == {"before": None, "after": None}  # CPU: no GPU to read
