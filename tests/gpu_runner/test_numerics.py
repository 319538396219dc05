"""Numerics: cost vs rule chunkings, the same chunking twice, and a one-shot reference, each
given a verdict against its dtype's tolerance (crafted logits test the verdicts themselves)."""

from __future__ import annotations

import pytest
import torch

from gpu_runner.analyses import ANALYSES
from gpu_runner.numerics import BITWISE, DIFFERS, NOT_BITWISE, TOLERANCES, WITHIN, compare, passed
from scheduler_core.events import conforms

NUMERICS = ANALYSES["numerics"]


def test_chunkings_agree_with_the_one_shot_prefill_and_repeat_bitwise():
    catalog = [
        {"prefill": 16, "decode": 0, "ms": 1.0},
        {"prefill": 32, "decode": 0, "ms": 1.5},
        {"prefill": 64, "decode": 0, "ms": 5.0},
    ]
    params = NUMERICS.validate({"boot_catalog": catalog, "repeats": 2, "prompt_tokens": 150, "device": "cpu"})
    events: list[dict] = []
    result = NUMERICS.run(params, events.append)
    for event in events:
        conforms(event, NUMERICS.events)
    assert result["chunkings"]["cost"]["graphs"] != result["chunkings"]["rule"]["graphs"]
    assert result["reproducible"] and all(r["verdict"] == BITWISE for r in result["same_chunking_twice"].values())
    assert result["tolerance"] == {"dtype": "float32", "max_rel_diff": 1e-4, "cache_rel_diff": 1e-4, "top_k": 5}
    for policy in ("cost", "rule"):  # the KV cache layer by layer, and the causality probe
        assert result["kv_vs_one_shot"][policy]["verdict"] in (BITWISE, WITHIN)
        assert len(result["kv_vs_one_shot"][policy]["layers"]) == 2
        assert result["causality"][policy]["verdict"] == BITWISE
    for comparison in (*result["vs_one_shot"].values(), result["cost_vs_rule"]):
        assert comparison["verdict"] in (BITWISE, WITHIN) and comparison["max_rel_diff"] <= 1e-4
    assert result["ok"]
    text = NUMERICS.format_text(result)
    assert text.splitlines()[-2].startswith("reproducible") and "cost vs rule:" in text
    assert "cost  KV cache vs one-shot: " in text and "nothing before it changed (bitwise identical)" in text
    assert text.splitlines()[-1] == "numerics: pass"


def logits(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


REFERENCE = logits(4.0, 3.7, 2.0, 1.0, 0.5, 0.0, -1.0)  # bounds: fp32 4e-4, bf16 0.2


@pytest.mark.parametrize(
    ("dtype", "changed", "verdict"),
    [
        ("float32", REFERENCE.clone(), BITWISE),
        ("float32", REFERENCE + 5e-5, WITHIN),
        ("float32", REFERENCE + torch.tensor([0, 0, 0, 0, 0, 0, 6e-4]), DIFFERS),
        ("bfloat16", REFERENCE + 0.15, WITHIN),
        ("bfloat16", REFERENCE + torch.tensor([0, 0.5, 0, 0, 0, 0, 0]), DIFFERS),
        # every logit within 0.2, yet the argmax moved to an id 0.3 below the winner in the reference
        ("bfloat16", logits(3.84, 3.86, 2.0, 1.0, 0.5, 0.0, -1.0), DIFFERS),
    ],
)
def test_a_comparison_gets_the_verdict_its_dtype_tolerance_gives(dtype, changed, verdict):
    assert compare(changed, REFERENCE, TOLERANCES[dtype])["verdict"] == verdict


def test_an_argmax_swap_on_a_near_tie_is_within_bf16_tolerance_but_not_on_a_clear_winner():
    tied = logits(4.0, 3.9, 2.0, 1.0, 0.5, 0.0, -1.0)
    swapped = logits(3.95, 4.0, 2.0, 1.0, 0.5, 0.0, -1.0)
    result = compare(swapped, tied, TOLERANCES["bfloat16"])
    assert result["argmax"] == [1, 0] and result["argmax_agree"] and result["verdict"] == WITHIN
    assert not compare(swapped, tied, TOLERANCES["float32"])["argmax_agree"]


def test_top_k_must_agree_up_to_near_ties():
    """Each logit within 0.45 (5% of 9), but an id 0.6 below the reference's 5th largest enters the top 5."""
    reference = logits(9.0, 8.0, 7.0, 6.0, 5.0, 4.4, 0.0)
    changed = logits(9.0, 8.0, 7.0, 6.0, 4.6, 4.8, 0.0)
    result = compare(changed, reference, TOLERANCES["bfloat16"])
    assert result["max_rel_diff"] <= 0.05 and result["argmax_agree"]
    assert not result["top_k_agree"] and result["verdict"] == DIFFERS
    near_tie = logits(9.0, 8.0, 7.0, 6.0, 5.0, 4.9, 0.0)  # 0.1 below the 5th: a tie within tolerance
    assert compare(logits(9.0, 8.0, 7.0, 6.0, 4.9, 5.0, 0.0), near_tie, TOLERANCES["bfloat16"])["verdict"] == WITHIN


def test_the_same_chunking_twice_must_be_bitwise_identical_within_tolerance_is_not_enough():
    result = compare(REFERENCE + 1e-6, REFERENCE, TOLERANCES["float32"], bitwise_required=True)
    assert result["max_rel_diff"] <= 1e-4 and result["verdict"] == NOT_BITWISE and not passed(result)
    assert passed(compare(REFERENCE.clone(), REFERENCE, TOLERANCES["float32"], bitwise_required=True))


def test_nan_logits_differ_beyond_any_tolerance():
    broken = REFERENCE.clone()
    broken[3] = float("nan")
    assert compare(broken, REFERENCE, TOLERANCES["bfloat16"])["verdict"] == DIFFERS
