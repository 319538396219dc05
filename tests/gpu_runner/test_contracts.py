"""The documented contracts the CUDA path keeps, checked as far as a CPU allows: graphs in pools of
their own (their cost in the memory estimate, each later graph checked against free memory before
its capture), the attention kernel read through the public profiler ("could not tell" is no
failure), grouped key/value heads never copied where the kernel takes them, and the numerics
reference computed in the boot's own cache. The graph pools themselves: tests/gpu_runner/test_cuda.py."""

from __future__ import annotations

import pytest
import torch

from gpu_runner import attention, device, model, numerics
from gpu_runner.errors import BootOutOfMemory
from gpu_runner.execute import execute, prompt_tokens
from gpu_runner.graphs import BootedModel
from gpu_runner.numerics import one_shot, snapshot
from gpu_runner.presets import PRESETS, default_shapes, estimate_bytes, graph_bytes
from scheduler_core.catalog import catalog_from_mapping
from scheduler_core.planner import plan
from scheduler_core.request import Request

from .conftest import SHAPES, small_context


def test_on_cuda_every_graphs_activations_are_reserved_at_once_on_cpu_only_the_largest():
    config, shapes = PRESETS["llama-2-7b"], default_shapes()
    cuda, peak = estimate_bytes(config, shapes, "cuda")
    cpu, same_peak = estimate_bytes(config, shapes, "cpu")
    assert peak == same_peak == (4096, 0)
    length = -(-(config.context_tokens + 4096) // 64) * 64
    others = sum(graph_bytes(config, length, p, d, "cuda") for p, d in shapes if (p, d) != peak)
    assert cuda - cpu == int(1.2 * others) or abs((cuda - cpu) - 1.2 * others) < 2  # a pool per graph
    assert 50 * 2**30 < cuda < 60 * 2**30  # llama-2-7b's default boot: fits an 80 GB card


def test_only_the_math_kernel_is_charged_for_materialised_scores():
    fused = PRESETS["llama-2-7b"]
    math = type(fused)(**{**fused.__dict__, "attention_cuda": "math"})
    assert (
        graph_bytes(math, 20480, 4096, 0, "cuda") - graph_bytes(fused, 20480, 4096, 0, "cuda") == 32 * 4096 * 20480 * 4
    )


def test_a_graph_captured_after_boot_is_refused_before_capture_when_its_estimate_exceeds_free_memory(monkeypatch):
    monkeypatch.setattr(device, "available_bytes", lambda d: 2**20)
    with pytest.raises(
        BootOutOfMemory, match=r"shape prefill=512 decode=0 of preset tiny .* by estimate, 0.00 GiB free"
    ):
        device.check_graph_fits(PRESETS["tiny"], 4160, 512, torch.device("cuda"))
    device.check_graph_fits(PRESETS["tiny"], 4160, 512, torch.device("cpu"))  # CPU: no graph, nothing reserved


def test_the_kernel_is_read_from_the_public_profiler_and_could_not_tell_is_no_failure(monkeypatch):
    monkeypatch.setattr(attention, "FUSED_OPS", {})
    monkeypatch.setattr(attention, "SOFTMAX_OPS", set())  # as a torch whose profiler names no attention op
    boot = BootedModel(small_context(), torch.device("cpu"), SHAPES)
    boot.prepare(SHAPES)
    assert boot.attention["observed"] == [] and boot.attention["verdict"].startswith("could not tell")
    assert all(launcher is not None for launcher in boot.launchers.values())  # the boot went on


def test_grouped_heads_reach_the_kernel_uncopied_where_it_takes_them(monkeypatch):
    seen: list[tuple[tuple[int, ...], bool, int]] = []
    real = model.attend

    def spy(kernel, q, k, v, mask, gqa=False):
        seen.append((tuple(k.shape), gqa, k.untyped_storage().data_ptr()))
        return real(kernel, q, k, v, mask, gqa)

    monkeypatch.setattr(model, "attend", spy)
    q = torch.randn(1, 4, 16, 64)
    cache = torch.randn(1, 32, 2, 64)  # token-major, 2 key/value heads
    mask = torch.zeros(16, 32)
    grouped = model.grouped_attention("flash", 2, q, cache, cache, mask, grouped_heads=True)
    repeated = model.grouped_attention("flash", 2, q, cache, cache, mask, grouped_heads=False)
    single = model.grouped_attention("flash", 1, q[:, :2], cache, cache, mask)
    assert [s[:2] for s in seen] == [((1, 2, 32, 64), True), ((1, 4, 32, 64), False), ((1, 2, 32, 64), False)]
    assert seen[0][2] == seen[2][2] == cache.untyped_storage().data_ptr()  # views of the cache, no copy
    torch.testing.assert_close(grouped, repeated, atol=1e-6, rtol=1e-6)
    assert single.shape == (1, 2, 16, 64)
    assert attention.takes_grouped_heads("flash", torch.device("cpu"), torch.float32, 4, 2, 64)
    assert not attention.takes_grouped_heads("efficient", torch.device("cpu"), torch.float32, 4, 2, 64)  # CUDA's


def test_a_boot_records_how_its_key_value_heads_reach_the_kernel():
    boot = BootedModel(small_context(), torch.device("cpu"), SHAPES)  # tiny: 4 query heads on 2
    assert boot.attention["kv_heads"] == "grouped (enable_gqa)"
    efficient = type(small_context())(**{**small_context().__dict__, "attention_cpu": "math", "kv_heads": 4})
    assert BootedModel(efficient, torch.device("cpu"), SHAPES).attention["kv_heads"] == "as they are (not grouped)"


def test_the_one_shot_reference_shares_the_boots_cache(boot, monkeypatch):
    def no_second_cache(*args, **kwargs):
        raise AssertionError("the reference allocated a cache of its own")

    monkeypatch.setattr(numerics, "KVCache", no_second_cache)
    prompt = prompt_tokens(boot, 120, seed=5)
    chosen = plan("rule", catalog_from_mapping({16: 1.0, 32: 1.5, 64: 2.5}), Request(120))
    logits = execute(boot, chosen, prompt).logits
    chunked = snapshot(boot.cache, 120)
    reference, cache = one_shot(boot, prompt)
    assert torch.equal(cache.k, boot.cache.k[:, :120])  # written into the boot's cache, copied out
    torch.testing.assert_close(chunked.k, cache.k, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits, reference, atol=1e-4, rtol=1e-4)
