import json
import subprocess
import sys

import pytest

from scheduler_core.analyses.sweep import ANALYSIS, format_text, prompt_lengths
from scheduler_core.errors import InvalidInput
from scheduler_core.policies import selectable_policies


def sweep(**params):
    events = []
    return ANALYSIS.run(ANALYSIS.validate(params), events.append), events


def test_log_spacing_covers_both_ends_with_distinct_sorted_lengths():
    lengths = prompt_lengths(ANALYSIS.validate({"prompt_min": 1, "prompt_max": 131072, "count": 300}))
    assert lengths[0] == 1 and lengths[-1] == 131072
    assert lengths == sorted(set(lengths)) and len(lengths) <= 300


def test_linear_spacing_is_evenly_spaced():
    params = ANALYSIS.validate({"prompt_min": 100, "prompt_max": 500, "count": 5, "spacing": "linear"})
    assert prompt_lengths(params) == [100, 200, 300, 400, 500]


def test_it_reproduces_the_pull_requests_arms_as_points_on_the_curve():
    result, _ = sweep(prompt_min=3504, prompt_max=14000, count=2, spacing="linear", policies=["cost", "rule"])
    assert result["prompt_tokens"] == [3504, 14000]
    clean, drift = result["series"]["clean"], result["series"]["drift"]
    assert clean["cost"]["ttft_ms"] == [62.1, 232.1] and clean["rule"]["ttft_ms"] == [66.1, 232.1]
    assert drift["cost"]["ttft_ms"] == [62.1, 238.1] and drift["rule"]["ttft_ms"] == [66.1, 232.1]
    assert drift["cost"]["launches"] == [3, 9] and drift["rule"]["launches"] == [1, 4]
    assert result["delta_ms"]["drift"] == [4.0, -6.0] and set(drift) == {"cost", "rule"}  # derived: its own key


def test_the_rule_never_beats_the_cost_model_on_a_faithful_catalog():
    """On the clean catalog predicted == true cost, so the cost model's plan is optimal in true TTFT."""
    result, _ = sweep(count=400, spacing="linear", prompt_max=20000)
    clean = result["summary"]["clean"]
    assert clean["after_wins"] == 0 and clean["after_loses"] > 0
    assert all(d >= 0 for d in result["delta_ms"]["clean"])


def test_the_summary_counts_every_length_and_locates_the_worst_loss():
    result, _ = sweep(count=200)
    for name, s in result["summary"].items():
        delta = result["delta_ms"][name]
        assert s["after_wins"] + s["after_loses"] + s["ties"] == s["prompts"] == len(result["prompt_tokens"])
        assert s["max_loss_ms"] == max(delta)
        assert delta[result["prompt_tokens"].index(s["max_loss_at"])] == max(delta)
    drift = result["summary"]["drift"]
    assert drift["max_gain_ms"] > 0 and drift["mean_launches_saved"] > 0


def test_the_delta_is_the_first_two_policies_run_after_minus_before():
    result, _ = sweep(prompt_min=3504, prompt_max=14000, count=2, spacing="linear", policies=["rule", "cost"])
    assert result["pair"] == {"before": "rule", "after": "cost", "label": "cost − rule"}
    assert result["delta_ms"]["drift"] == [-4.0, 6.0]  # cost - rule: the pull request's arms, reversed
    assert result["summary"]["drift"]["after_loses"] == 1 and "cost wins 1, loses 1" in format_text(result)


def test_one_policy_gives_its_series_but_no_delta():
    result, _ = sweep(count=10, policies=["rule"], catalogs=["drift"])
    assert set(result["series"]) == {"drift"} and set(result["series"]["drift"]) == {"rule"}
    assert result["summary"] == {} and result["pair"] is None


def test_padding_is_zero_when_every_length_is_a_multiple_of_the_full_chunk():
    result, _ = sweep(prompt_min=4096, prompt_max=40960, count=10, spacing="linear")
    assert result["series"]["clean"]["rule"]["padded_tokens"] == [0] * 10


def test_it_reports_progress_from_zero_to_total_in_order():
    result, events = sweep(count=64)
    done = [e["done"] for e in events if e["type"] == "progress"]
    assert done[0] == 0 and done[-1] == events[-1]["total"] == len(result["prompt_tokens"]) * 2 * len(
        selectable_policies()
    )
    assert done == sorted(done) and len(done) < 64


def test_the_result_is_plain_json():
    result, _ = sweep(count=8)
    assert json.loads(json.dumps(result)) == result


def test_it_rejects_prompt_min_above_prompt_max():
    with pytest.raises(InvalidInput) as exc:
        ANALYSIS.validate({"prompt_min": 500, "prompt_max": 100})
    assert exc.value.field == "prompt_min"


def test_it_rejects_a_sweep_that_would_take_hours():
    with pytest.raises(InvalidInput, match="too large"):
        ANALYSIS.validate({"count": 100_000, "prompt_max": 1 << 20, "spacing": "linear"})


def test_the_text_names_each_catalog():
    result, _ = sweep(count=16)
    text = ANALYSIS.format_text(result)
    assert "clean" in text and "drift" in text and "max loss" in text


def test_the_old_names_of_the_prompt_range_are_still_accepted_for_one_release():
    assert ANALYSIS.validate({"min_tokens": 100, "max_tokens": 500}) == ANALYSIS.validate(
        {"prompt_min": 100, "prompt_max": 500}
    )
    with pytest.raises(InvalidInput) as exc:
        ANALYSIS.validate({"max_tokens": 500, "prompt_max": 500})
    assert exc.value.field == "max_tokens" and "prompt_max" in exc.value.message
    properties = ANALYSIS.params_schema()["properties"]
    assert properties["max_tokens"]["deprecated"] is True
    assert properties["max_tokens"]["maximum"] == properties["prompt_max"]["maximum"]


def test_the_cli_takes_the_old_flag_as_the_new_one():
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler_core",
            "sweep",
            "--json",
            "--count",
            "2",
            "--min-tokens",
            "3504",
            "--max-tokens",
            "4000",
            "--catalogs",
            "clean",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(run.stdout)["prompt_tokens"] == [3504, 4000]
