"""The CUDA path: captured graphs, CUDA-event timing, bf16 presets. Skipped without a GPU, never faked;
`scripts/gpu-check` runs these and the end-to-end report when an accelerator is lent."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from gpu_runner.analyses import ANALYSES
from gpu_runner.execute import execute, prompt_tokens
from gpu_runner.graphs import BootedModel
from gpu_runner.numerics import one_shot, snapshot
from gpu_runner.presets import PRESETS
from scheduler_core.catalog import Catalog, catalog_from_mapping
from scheduler_core.planner import plan
from scheduler_core.request import Request

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
SHAPES = [(16, 0), (32, 0), (64, 0), (0, 2), (16, 2)]


@pytest.fixture(scope="module")
def cuda_boot() -> BootedModel:
    boot = BootedModel(PRESETS["tiny"], torch.device("cuda"), SHAPES)
    boot.prepare(SHAPES)
    return boot


def test_every_shape_is_a_captured_graph(cuda_boot):
    assert all(l.graph is not None for l in cuda_boot.launchers.values())


def test_the_pinned_attention_kernel_is_the_one_recorded_as_run(cuda_boot):
    seen = cuda_boot.attention
    assert (seen["pinned"], seen["observed"], seen["verdict"]) == ("efficient", ["efficient"], "ran as pinned")
    assert seen["kv_heads"] in ("grouped (enable_gqa)", "repeated x2 (the kernel refused enable_gqa)")


def test_a_graph_replay_computes_what_the_eager_call_computes(cuda_boot):
    launcher = cuda_boot.prefill_launcher(64)
    launcher.load_chunk(prompt_tokens(cuda_boot, 50, seed=1), 0, 50)
    replayed = launcher.launch().clone()
    torch.testing.assert_close(replayed, launcher.eager(), atol=1e-5, rtol=1e-5)


def test_a_chunk_late_in_a_prompt_replays_its_own_key_buckets_graph(cuda_boot):
    late = cuda_boot.prefill_launcher(64, 128)
    assert late.graph is not None and late.step.keys == 256 and late is not cuda_boot.launchers[(64, 0)]
    prompt = prompt_tokens(cuda_boot, 192, seed=4)
    execute(cuda_boot, plan("rule", catalog_from_mapping({64: 1.0}), Request(192)), prompt)
    late.load_chunk(prompt, 128, 192)
    replayed = late.launch().clone()
    torch.testing.assert_close(replayed, late.eager(), atol=1e-5, rtol=1e-5)


def test_chunked_graph_prefill_equals_one_shot_prefill_on_cuda(cuda_boot):
    request = Request(150, atomic_spans=((40, 70),))
    prompt = prompt_tokens(cuda_boot, 150, seed=2)
    run = execute(cuda_boot, plan("rule", catalog_from_mapping({16: 1.0, 32: 1.5, 64: 2.5}), request), prompt)
    chunked = snapshot(cuda_boot.cache, 150)  # the reference is written into the same cache
    reference, cache = one_shot(cuda_boot, prompt)
    torch.testing.assert_close(run.logits, reference, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(chunked.k, cache.k, atol=2e-3, rtol=2e-3)


def test_a_small_capture_is_a_cuda_graph_boot_with_cuda_provenance():
    capture = ANALYSES["capture"]
    result = capture.run(
        capture.validate(
            {"preset": "small", "device": "cuda", "capacities": [64, 512], "decode_rows": [8], "repeats": 5}
        ),
        lambda e: None,
    )
    Catalog.from_dicts(result["catalog"])
    assert result["provenance"]["mode"] == "cuda-graph" and result["provenance"]["cuda"]
    assert result["provenance"]["attention"]["observed"] == ["efficient"]
    assert all(m["mode"] == "cuda-graph" and m["samples"] == 5 and m["warmup"] >= 3 for m in result["measurements"])
    state = result["provenance"]["gpu_state"]
    if shutil.which("nvidia-smi"):  # clocks, power and throttle reasons before and after the measurements
        assert state["before"]["sm_mhz"] > 0 and state["after"]["power_limit_w"] > 0 and state["after"]["throttle"]


def test_two_boots_are_two_fresh_processes_each_with_its_own_cuda_context():
    capture = ANALYSES["capture"]
    params = {"device": "cuda", "capacities": [64, 128], "graphs": "prefill", "repeats": 5, "boots": 2}
    result = capture.run(capture.validate(params), lambda e: None)
    provenance = [b["provenance"] for b in result["boots"]]
    assert len({p["pid"] for p in provenance}) == 2 and os.getpid() not in {p["pid"] for p in provenance}
    assert all(p["mode"] == "cuda-graph" and p["cuda"] for p in provenance)
    assert [g["prefill"] for g in result["boots"][0]["catalog"]] == [
        g["prefill"] for g in result["boots"][1]["catalog"]
    ]


def test_small_numerics_repeat_bitwise_on_cuda_graphs():
    numerics = ANALYSES["numerics"]
    result = numerics.run(
        numerics.validate(
            {"preset": "small", "device": "cuda", "capacities": [64, 128, 256], "repeats": 3, "prompt_tokens": 700}
        ),
        lambda e: None,
    )
    assert result["tolerance"]["dtype"] == "bfloat16"
    assert all(r["verdict"] == "bitwise identical" for r in result["same_chunking_twice"].values())
    assert result["ok"], result


def test_every_graph_is_captured_into_a_memory_pool_of_its_own(cuda_boot):
    """Plans and timing replay graphs in any order: PyTorch documents a shared pool as safe only for
    graphs replayed in capture order, so none is shared (the cost: `presets.estimate_bytes`)."""
    graphs = [l.graph for l in [*cuda_boot.launchers.values(), *cuda_boot.later.values()]]
    assert all(g is not None for g in graphs)
    assert len({g.pool() for g in graphs}) == len(graphs)
