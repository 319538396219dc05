"""Numerics that can fail on subtle bugs, in bf16: after the first chunk, keys written one slot
off are caught by the KV cache comparison over the prompt (layer by layer), a query seeing one
token ahead by the causality probe, though neither moves the logits past their bound (measured
here: 0.7 % and 0.4-0.5 % against 5 %); a correct chunked prefill passes everything."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gpu_runner import model
from gpu_runner.graphs import BootedModel
from gpu_runner.numerics import DIFFERS, SEES_LATER, compare_chunkings
from gpu_runner.presets import PRESETS
from scheduler_core.catalog import catalog_from_mapping

SHAPES = [(32, 0), (64, 0), (128, 0)]
PLANNING = catalog_from_mapping({32: 1.0, 64: 1.8, 128: 3.0})
PROMPT = 400


def one_slot_offset(chunk_positions: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    return chunk_positions + (start > 0).long()  # later chunks write their keys one slot late


def one_token_leak(keys: torch.Tensor, chunk_positions: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    return keys[None, :] <= chunk_positions[:, None] + (start > 0).long()  # later chunks see one token ahead


@pytest.fixture(scope="module")
def boot() -> BootedModel:
    config = dataclasses.replace(PRESETS["tiny"], dtype="bfloat16", context_tokens=512)
    b = BootedModel(config, torch.device("cpu"), SHAPES)
    b.prepare(SHAPES)
    return b


def test_a_correct_bf16_chunked_prefill_passes_every_comparison(boot):
    result = compare_chunkings(boot, PLANNING, PROMPT, seed=0)
    assert result["tolerance"]["dtype"] == "bfloat16" and result["tolerance"]["cache_rel_diff"] == 0.05
    assert all(len(c["chunks"]) > 1 for c in result["chunkings"].values())  # both policies really chunk
    assert result["ok"], result
    for policy, cache in result["kv_vs_one_shot"].items():
        assert len(cache["layers"]) == boot.config.layers and cache["max_rel_diff"] <= 0.05
        probe = result["causality"][policy]
        assert probe["verdict"] == "bitwise identical" and probe["first_changed_position"] is None
        assert result["chunkings"][policy]["chunks"][-1][0] < probe["altered_position"] < PROMPT


def test_keys_written_one_slot_off_are_caught_in_the_kv_cache_not_in_the_logits(boot, monkeypatch):
    monkeypatch.setattr(model, "kv_slots", one_slot_offset)
    result = compare_chunkings(boot, PLANNING, PROMPT, seed=0)
    assert not result["ok"]
    for policy, cache in result["kv_vs_one_shot"].items():
        assert cache["verdict"] == DIFFERS and cache["max_rel_diff"] > 10 * 0.05, (policy, cache)
        assert result["vs_one_shot"][policy]["verdict"] == "within tolerance"  # the logits alone miss it


def test_a_query_seeing_one_token_ahead_is_caught_by_the_causality_probe(boot, monkeypatch):
    monkeypatch.setattr(model, "visible", one_token_leak)
    result = compare_chunkings(boot, PLANNING, PROMPT, seed=0)
    assert not result["ok"]
    for policy, probe in result["causality"].items():
        assert probe["verdict"] == SEES_LATER, (policy, probe)
        assert probe["first_changed_position"] == probe["altered_position"] - 1  # the query just before it
        assert result["vs_one_shot"][policy]["verdict"] == "within tolerance"  # the logits alone miss it
