"""Run a scheduler_core plan on a boot: its launches in order, each through the graph of its
capacity (padding included), then sample the first token. This is the real TTFT the harness
only predicts."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from scheduler_core.planner import Plan

from .graphs import BootedModel
from .timing import Stopwatch, synchronize


@dataclass(frozen=True)
class Execution:
    """One prefill run: host wall-clock TTFT, each launch's device time, and the logits sampled."""

    ttft_ms: float
    launch_ms: tuple[float, ...]
    first_token: int
    logits: torch.Tensor  # float32 copy, [vocab]


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
    deterministic. Each launch runs its capacity's graph for the key bucket holding its chunk."""
    launchers = [boot.prefill_launcher(launch.graph, launch.start) for launch in plan.launches]  # built before timing
    watch = Stopwatch(boot.device)
    synchronize(boot.device)
    began = time.perf_counter()
    logits = None
    for launch, launcher in zip(plan.launches, launchers):
        launcher.load_chunk(prompt, launch.start, launch.end)
        logits = watch.time(launcher.launch)
    if logits is None:
        raise ValueError("the plan has no launches: nothing was prefilled")
    first = logits[0].float()
    token = int(first.argmax())  # waits for the device: the first token is on the host
    ttft = (time.perf_counter() - began) * 1000.0
    return Execution(ttft, tuple(watch.intervals_ms()), token, first.clone())
