import json

import pytest

from scheduler_core.analyses.boots import ANALYSIS
from scheduler_core.errors import InvalidInput


def boots(**params):
    events = []
    return ANALYSIS.run(ANALYSIS.validate(params), events.append), events


def by_prompt(result):
    return {row["prompt_tokens"]: row for row in result["prompts"]}


def test_the_rule_launches_one_sequence_across_noisy_boots():
    result, _ = boots(boots=48, sigma=0.1)
    assert result["overall"]["rule"] == {
        "prompts": 3,
        "prompts_with_one_sequence": 3,
        "max_distinct_sequences": 1,  # per prompt: three prompts planned one way each are not "3 sequences"
        "max_ttft_spread_ms": 0.0,
    }
    assert by_prompt(result)[3504]["rule"]["most_common"] == {"graphs": [4096], "boots": 48}


def test_the_cost_model_follows_the_noise_into_several_sequences_and_ttfts():
    result, _ = boots(boots=48, sigma=0.1)
    cost = by_prompt(result)[14000]["cost"]
    assert cost["distinct_sequences"] > 1 and cost["ttft_ms"]["spread"] > 0
    assert cost["ttft_ms"]["min"] <= cost["ttft_ms"]["mean"] <= cost["ttft_ms"]["max"]
    assert result["overall"]["cost"]["prompts_with_one_sequence"] < 3


def test_without_noise_every_boot_agrees_for_both_policies():
    result, _ = boots(boots=5, sigma=0.0, prompts=[3504, 14000])
    for row in result["prompts"]:
        for policy in ("cost", "rule"):
            assert row[policy]["distinct_sequences"] == 1 and row[policy]["ttft_ms"]["spread"] == 0.0
    assert by_prompt(result)[3504]["cost"]["most_common"]["graphs"] == [2048, 1024, 512]


def test_the_same_seed_replays_the_same_boots():
    first, _ = boots(boots=10, seed=7, prompts=[5000])
    again, _ = boots(boots=10, seed=7, prompts=[5000])
    assert first == again


def test_it_reports_progress_up_to_the_last_boot():
    _, events = boots(boots=20, prompts=[3504])
    done = [e["done"] for e in events if e["type"] == "progress"]
    assert done[0] == 0 and done[-1] == 20 and done == sorted(done)


def test_the_result_is_plain_json():
    result, _ = boots(boots=3, prompts=[100])
    assert json.loads(json.dumps(result)) == result


def test_it_rejects_a_run_that_would_take_hours():
    with pytest.raises(InvalidInput, match="too large"):
        ANALYSIS.validate({"boots": 10_000, "prompts": [1 << 20]})


def test_it_rejects_duplicate_prompts():
    with pytest.raises(InvalidInput) as exc:
        ANALYSIS.validate({"prompts": [100, 100]})
    assert exc.value.field == "prompts"
