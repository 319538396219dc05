"""What a CUDA graph needs of the model, checked on CPU by listing the ATen ops a step dispatches:
no op that reads a device value back to the host (capture refuses it), and the same ops whatever
the chunk's data (a graph replays the one sequence it recorded). The CUDA run itself is in
test_cuda.py, skipped without a GPU."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gpu_runner.execute import prompt_tokens
from gpu_runner.graphs import BootedModel
from gpu_runner.presets import PRESETS

SHAPES = [(64, 0), (0, 2), (64, 2)]
# Ops that synchronise with the host or size their output from data: illegal while capturing.
HOST_SYNC = {
    "aten._local_scalar_dense.default",
    "aten.nonzero.default",
    "aten.masked_select.default",
    "aten.repeat_interleave.Tensor",
    "aten.is_nonzero.default",
    "aten.equal.default",
    "aten._unique2.default",
    "aten.item.default",
}


class OpLog(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.fixture(scope="module")
def boot() -> BootedModel:
    boot = BootedModel(PRESETS["tiny"], torch.device("cpu"), SHAPES)
    boot.prepare(SHAPES)
    return boot


def ops_of_launch(boot: BootedModel, shape: tuple[int, int], start: int, end: int) -> list[str]:
    launcher = boot.launchers[shape]
    if shape[0]:
        launcher.load_chunk(prompt_tokens(boot, end, seed=start), start, end)
    with OpLog() as log:
        launcher.launch()
    return log.ops


@pytest.mark.parametrize("shape", SHAPES)
def test_a_step_reads_nothing_back_to_the_host(boot, shape):
    ops = ops_of_launch(boot, shape, 0, 40)
    assert ops, "no op was dispatched: the check would pass vacuously"
    assert not HOST_SYNC.intersection(ops)


def test_a_step_runs_the_same_ops_whatever_chunk_it_holds(boot):
    """A full chunk at 0 and a padded one further on: one op sequence, so one captured graph serves both."""
    assert ops_of_launch(boot, (64, 2), 0, 64) == ops_of_launch(boot, (64, 2), 200, 213)


def test_loading_a_chunk_reads_nothing_back_to_the_host(boot):
    launcher = boot.launchers[(64, 0)]
    prompt = prompt_tokens(boot, 100, seed=3)
    with OpLog() as log:
        launcher.load_chunk(prompt, 60, 100)
    assert log.ops and not HOST_SYNC.intersection(log.ops)
