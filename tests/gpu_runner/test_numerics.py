"""Numerics: cost vs rule chunkings, the same chunking twice, and a one-shot reference."""

from __future__ import annotations

from gpu_runner.analyses import ANALYSES
from scheduler_core.events import conforms

NUMERICS = ANALYSES["numerics"]


def test_chunkings_agree_with_the_one_shot_prefill_and_repeat_bitwise():
    catalog = [
        {"prefill": 16, "decode": 0, "ms": 1.0},
        {"prefill": 32, "decode": 0, "ms": 1.5},
        {"prefill": 64, "decode": 0, "ms": 5.0},
    ]
    params = NUMERICS.validate({"catalog": catalog, "repeats": 2, "prompt_tokens": 150, "device": "cpu"})
    events: list[dict] = []
    result = NUMERICS.run(params, events.append)
    for event in events:
        conforms(event, NUMERICS.events)
    assert result["chunkings"]["cost"]["graphs"] != result["chunkings"]["rule"]["graphs"]
    assert result["reproducible"] and all(r["bitwise_identical"] for r in result["same_chunking_twice"].values())
    for comparison in (*result["vs_one_shot"].values(), result["cost_vs_rule"]):
        assert comparison["argmax_agree"] and comparison["max_abs_diff"] < 1e-3
        assert comparison["max_rel_diff"] <= result["tolerance"]["max_rel_diff"]
    text = NUMERICS.format_text(result)
    assert text.splitlines()[-1].startswith("reproducible") and "cost vs rule:" in text
