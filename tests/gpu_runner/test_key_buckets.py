"""A graph costs its own chunk: a prefill attends the key bucket holding its filled prefix, not the
whole cache window, and a chunk late in a long prompt runs a longer bucket's graph."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gpu_runner.capture import time_launches
from gpu_runner.execute import execute, prompt_tokens
from gpu_runner.graphs import BootedModel
from gpu_runner.model import key_bucket, key_buckets
from gpu_runner.numerics import one_shot, snapshot
from gpu_runner.presets import PRESETS
from scheduler_core.catalog import catalog_from_mapping
from scheduler_core.planner import plan
from scheduler_core.request import Request


def test_buckets_double_to_2048_then_grow_by_2048_and_end_at_the_cache():
    assert list(key_buckets(9000)) == [64, 128, 256, 512, 1024, 2048, 4096, 6144, 8192, 9000]
    assert key_bucket(20480, 64) == 64 and key_bucket(20480, 65) == 128
    assert key_bucket(20480, 16000 + 64) == 16384 and key_bucket(20480, 20480) == 20480
    with pytest.raises(ValueError, match="does not fit"):
        key_bucket(20480, 20481)


@pytest.fixture
def one_thread():
    """Timed on one thread: torch's pool spins for descheduled threads on a loaded machine, which
    swamps a millisecond step's timing with waits that have nothing to do with its work."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_64_token_chunk_after_16000_cached_tokens_costs_more_than_after_none(one_thread):
    """Work, measured robustly: by shape, attention over 16,384 keys is 2.1 GFLOP against the
    step's 0.19 GFLOP of matmuls (tiny: 2 layers, 4 heads of 64); timed, the fastest of 7 calls
    (interference only adds) must differ at least 2x (about 11x measured on a loaded 2-core box)."""
    config = dataclasses.replace(PRESETS["tiny"], context_tokens=16384)
    boot = BootedModel(config, torch.device("cpu"), [(64, 0)])
    boot.prepare([(64, 0)])
    first, late = boot.prefill_launcher(64, 0), boot.prefill_launcher(64, 16000)
    assert (first.step.keys, late.step.keys) == (64, 16384)
    assert boot.length == 16448  # the whole window a graph used to attend
    late.step.start.fill_(16000)
    cheap = min(time_launches(first, boot.device, 7, warmup=2))
    dear = min(time_launches(late, boot.device, 7, warmup=2))
    assert dear > 2.0 * cheap, (cheap, dear)


def test_a_prompt_crossing_buckets_still_equals_a_one_shot_prefill():
    """The chunks past 64 and 128 tokens run on longer buckets' graphs: logits and cache unchanged."""
    config = dataclasses.replace(PRESETS["tiny"], context_tokens=512)
    shapes = [(32, 0), (64, 0)]
    boot = BootedModel(config, torch.device("cpu"), shapes)
    boot.prepare(shapes)
    chosen = plan("rule", catalog_from_mapping({32: 1.0, 64: 2.0}), Request(300))
    prompt = prompt_tokens(boot, 300, seed=11)
    logits = execute(boot, chosen, prompt).logits
    assert sorted(boot.later) == [(64, 128), (64, 256), (64, 512)]
    chunked = snapshot(boot.cache, 300)  # the reference is written into the same cache
    reference, cache = one_shot(boot, prompt)
    torch.testing.assert_close(logits, reference, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(chunked.k, cache.k, atol=1e-5, rtol=1e-5)
