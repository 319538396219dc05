"""Bad input is refused with an error naming the problem, before a model is built."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from gpu_runner.analyses import ANALYSES
from scheduler_core.errors import InvalidInput


def refuse(kind: str, params: dict) -> InvalidInput:
    analysis = ANALYSES[kind]
    with pytest.raises(InvalidInput) as caught:
        analysis.run(analysis.validate(params), lambda e: None)
    return caught.value


def test_it_rejects_an_unknown_preset():
    assert refuse("capture", {"preset": "huge"}).field == "preset"


def test_it_rejects_a_shape_too_large_for_memory_before_allocating():
    error = refuse("capture", {"capacities": [65536, 16], "device": "cpu"})
    assert error.field == "capacities" and "prefill=65536" in error.message and "GiB" in error.message


def test_it_rejects_a_catalog_without_prefill_shapes():
    error = refuse("ttft", {"boot_catalog": [{"prefill": 0, "decode": 8, "ms": 1.0}]})
    assert error.field == "boot_catalog" and "no solo prefill graph" in error.message


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_it_rejects_cuda_where_there_is_none():
    error = refuse("numerics", {"device": "cuda"})
    assert error.field == "device" and "no CUDA device" in error.message


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_it_rejects_a_gpu_preset_on_cpu():
    assert refuse("capture", {"preset": "small"}).field == "preset"


def test_it_rejects_a_prompt_longer_than_the_presets_context():
    error = refuse("ttft", {"prompt_tokens": [100, 14000], "device": "cpu"})
    assert error.field == "prompt_tokens[1]" and "4096" in error.message


def test_it_rejects_drift_on_a_shape_the_boot_does_not_have():
    error = refuse("capture", {"capacities": [16, 32], "drift_capacities": [32, 64], "device": "cpu"})
    assert error.field == "drift_capacities[1]" and "[16, 32]" in error.message


def test_it_rejects_a_run_too_large_to_finish_in_minutes():
    assert refuse("capture", {"repeats": 1000, "boots": 10}).field == "repeats"


def test_importing_the_analyses_does_not_import_torch():
    code = "import sys, gpu_runner.analyses; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
