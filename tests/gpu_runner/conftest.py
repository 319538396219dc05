"""A small CPU boot shared by a module's tests: tiny's layers with a 256-token context, so every
step is milliseconds and the whole directory stays well under a minute on two cores."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gpu_runner.graphs import BootedModel
from gpu_runner.presets import PRESETS, ModelConfig

SHAPES = [(16, 0), (32, 0), (64, 0), (0, 2), (16, 2)]


def small_context() -> ModelConfig:
    return dataclasses.replace(PRESETS["tiny"], context_tokens=256, decode_context=256)


@pytest.fixture(scope="module")
def boot() -> BootedModel:
    b = BootedModel(small_context(), torch.device("cpu"), SHAPES)
    b.prepare(SHAPES)
    return b
