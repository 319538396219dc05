"""Run a scheduler_core plan on a boot: its launches in order, each through the graph of its
capacity (padding included), then sample the first token. This is the real TTFT the harness
only predicts."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import torch

from scheduler_core.planner import Plan

from .graphs import BootedModel
from .timing import Stopwatch, synchronize


@dataclass(frozen=True)
class Execution:
    """One prefill run as a serve sees it: host wall-clock TTFT; each launch's device time; the
    host copies around them (each chunk loaded into its graph's static buffers, then the first
    token sampled and copied to the host), timed the same way; the whole sequence as the device ran
    it, mixed shapes in order (launches, copies and the gaps between them); and the logits sampled."""

    ttft_ms: float
    launch_ms: tuple[float, ...]
    copy_ms: tuple[float, ...]  # one per chunk load, then the first token's sampling and copy
    sequence_ms: float  # first chunk load to first token on the host, device time (CPU: wall clock)
    first_token: int
    logits: torch.Tensor  # float32 copy, [vocab]

    @property
    def device_idle_ms(self) -> float:
        """The sequence's time in neither a launch nor a copy: the device waiting on the host."""
        return self.sequence_ms - sum(self.launch_ms) - sum(self.copy_ms)


def random_token_ids(vocab: int, count: int, seed: int, device: torch.device) -> torch.Tensor:
    """Token ids uniform over the vocabulary from a seeded host generator (same seed, same ids on
    any device): TTFT's prompts and the ids a capture times its graphs with."""
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, vocab, (count,), generator=gen).to(device)


def prompt_tokens(boot: BootedModel, count: int, seed: int) -> torch.Tensor:
    """A seeded random prompt on the boot's device (the same seed gives the same prompt)."""
    return random_token_ids(boot.config.vocab, count, seed, boot.device)


def execute(boot: BootedModel, plan: Plan, prompt: torch.Tensor) -> Execution:
    """TTFT runs from an idle device to the first token on the host; greedy sampling keeps it
    deterministic. Each launch runs its capacity's graph for the key bucket holding its chunk;
    launches, copies and the whole sequence are timed as they run (CUDA events: no sync between)."""
    launchers = [boot.prefill_launcher(launch.graph, launch.start) for launch in plan.launches]  # built before timing
    if not launchers:
        raise ValueError("the plan has no launches: nothing was prefilled")
    launches, copies, sequence = Stopwatch(boot.device), Stopwatch(boot.device), Stopwatch(boot.device)
    sampled: list[tuple[int, torch.Tensor]] = []

    def run() -> None:
        logits = None
        for launch, launcher in zip(plan.launches, launchers):
            copies.time(partial(launcher.load_chunk, prompt, launch.start, launch.end))
            logits = launches.time(launcher.launch)
        assert logits is not None
        sampled.append(copies.time(lambda: _sample(logits)))

    synchronize(boot.device)
    began = time.perf_counter()
    sequence.time(run)
    ttft = (time.perf_counter() - began) * 1000.0  # the token is on the host: `_sample` waited for it
    token, first = sampled[0]
    return Execution(
        ttft, tuple(launches.intervals_ms()), tuple(copies.intervals_ms()), sequence.intervals_ms()[0], token, first
    )


def _sample(logits: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Greedy: the first row's argmax, copied to the host (waits for the device)."""
    first = logits[0].float()
    return int(first.argmax()), first.clone()
