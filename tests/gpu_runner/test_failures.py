"""A boot that cannot run fails its job with an error naming the cause: a shape out of memory
(simulated, in a boot process and in process), the pinned attention kernel refusing a step,
a boot process that dies."""

from __future__ import annotations

import dataclasses
import sys
import warnings
from pathlib import Path

import pytest
import torch

from gpu_runner import fresh_boot, graphs, numerics
from gpu_runner.analyses import ANALYSES
from gpu_runner.attention import attend
from gpu_runner.device import shape_memory_guard
from gpu_runner.errors import AttentionBackendError, BootFailed, BootOutOfMemory
from gpu_runner.graphs import BootedModel

from .conftest import small_context

HERE = Path(__file__).resolve().parent
SHAPES = {"capacities": [16, 32], "graphs": "prefill", "repeats": 1, "warmup": 0, "device": "cpu"}


def run(kind: str, params: dict) -> dict:
    return ANALYSES[kind].run(ANALYSES[kind].validate(params), lambda e: None)


def test_out_of_memory_in_one_shape_fails_the_capture_naming_the_shape_and_memory(monkeypatch):
    monkeypatch.setattr(fresh_boot, "BOOT_COMMAND", [sys.executable, str(HERE / "oom_boot.py")])
    with pytest.raises(BootOutOfMemory) as caught:
        run("capture", SHAPES)
    message = str(caught.value)
    assert "shape prefill=32 decode=0 of preset tiny on cpu" in message
    assert "asked for 2.50 GiB" in message and "GiB free" in message


def test_out_of_memory_in_an_in_process_boot_names_the_shape_too(monkeypatch):
    real = graphs.BootedModel._build

    def build(self, prefill, decode):
        if prefill == 16:
            raise torch.OutOfMemoryError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 123 bytes.")
        return real(self, prefill, decode)

    monkeypatch.setattr(graphs.BootedModel, "_build", build)
    with pytest.raises(BootOutOfMemory, match=r"shape prefill=16 decode=0 .* asked for 123 bytes, [0-9.]+ GiB free"):
        run("ttft", {"capacities": [16, 32], "repeats": 1, "device": "cpu", "prompt_tokens": [40], "runs": 1})


def test_out_of_memory_in_the_numerics_one_shot_reference_names_its_shape(monkeypatch):
    def copy_out(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.50 GiB.")

    monkeypatch.setattr(numerics, "snapshot", copy_out)
    with pytest.raises(BootOutOfMemory, match=r"shape prefill=40 decode=0 .* asked for 1.50 GiB"):
        run("numerics", {"capacities": [16, 32], "repeats": 1, "device": "cpu", "prompt_tokens": 40})


def test_a_pinned_kernel_that_cannot_run_fails_naming_it():
    config = dataclasses.replace(small_context(), attention_cpu="efficient")  # CUDA-only kernel
    with pytest.raises(AttentionBackendError, match=r"attention backend 'efficient' cannot run this step"):
        BootedModel(config, torch.device("cpu"), [(16, 0)]).prepare([(16, 0)])


def refusing_kernel(*args, **kwargs):
    """SDPA as CUDA's refuses a pinned kernel: the reasons as warnings, then the error."""
    warnings.warn("Memory efficient kernel not used because:", stacklevel=2)
    warnings.warn("Mem efficient attention requires last dimension of inputs to be divisible by 4.", stacklevel=2)
    raise RuntimeError("No available kernel. Aborting execution.")


@pytest.mark.filterwarnings("ignore::UserWarning")  # the refused call's own warnings, as torch prints them
def test_a_refused_kernel_error_carries_the_reasons_torch_gave(monkeypatch):
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", refusing_kernel)
    with pytest.raises(AttentionBackendError) as caught:
        BootedModel(small_context(), torch.device("cpu"), [(16, 0)]).prepare([(16, 0)])
    message = str(caught.value)
    assert message.startswith("attention backend 'flash' cannot run this step")
    assert message.endswith(
        "torch: No available kernel. Aborting execution.; Memory efficient kernel not used because:; "
        "Mem efficient attention requires last dimension of inputs to be divisible by 4."
    )


def test_out_of_memory_inside_attention_is_not_blamed_on_the_kernel(monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB.")

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", out_of_memory)
    q = torch.zeros(1, 4, 16, 64)
    with pytest.raises(torch.OutOfMemoryError):  # as it is, outside a shape's guard (the one-shot reference)
        attend("flash", q, q, q, torch.zeros(16, 16))
    with pytest.raises(BootOutOfMemory, match=r"shape prefill=32 decode=0 .* asked for 3.00 GiB"):
        BootedModel(small_context(), torch.device("cpu"), [(16, 0), (32, 0)]).prepare([(16, 0), (32, 0)])


def test_the_observed_kernel_is_the_pinned_one():
    boot = BootedModel(
        dataclasses.replace(small_context(), attention_cpu="math"), torch.device("cpu"), [(16, 0), (0, 2)]
    )
    boot.prepare([(16, 0), (0, 2)])
    assert boot.attention == {
        "pinned": "math",
        "observed": ["math"],
        "verdict": "ran as pinned",
        "kv_heads": "grouped (enable_gqa)",  # tiny: 4 query heads on 2 key/value heads
    }


def test_a_boot_process_that_dies_fails_the_job_with_its_status_and_stderr(monkeypatch):
    monkeypatch.setattr(fresh_boot, "BOOT_COMMAND", [sys.executable, "-c", "import sys; sys.exit('boot crashed')"])
    with pytest.raises(BootFailed, match=r"boot 0 process \d+ exited with status 1: boot crashed"):
        run("capture", SHAPES)


def test_out_of_memory_behind_the_error_of_an_aborted_graph_capture_is_still_named():
    """Inside `torch.cuda.graph`, the block's end raises its own error with the OOM as context."""
    guard = shape_memory_guard(small_context(), torch.device("cpu"), (64, 0))
    with pytest.raises(BootOutOfMemory, match=r"shape prefill=64 decode=0 .* asked for 1.00 GiB"), guard:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB.")
        except torch.OutOfMemoryError:
            raise RuntimeError("operation not permitted when stream is capturing")  # noqa: B904
    with (
        pytest.raises(RuntimeError, match="unrelated"),
        shape_memory_guard(small_context(), torch.device("cpu"), (64, 0)),
    ):
        raise RuntimeError("unrelated")
