"""Real TTFT: a plan executed on the model returns per-launch times, TTFT and the harness's prediction."""

from __future__ import annotations

import pytest

from gpu_runner.analyses import ANALYSES

TTFT = ANALYSES["ttft"]


@pytest.fixture(scope="module")
def ttft() -> tuple[dict, list[dict]]:
    events: list[dict] = []
    params = TTFT.validate(
        {
            "capacities": [16, 32, 64],
            "repeats": 2,
            "runs": 2,
            "prompt_tokens": [100, 150],
            "policies": ["cost", "rule"],
            "device": "cpu",
        }
    )
    return TTFT.run(params, events.append), events


def test_each_arm_reports_ttft_and_a_time_per_launch(ttft):
    result, _ = ttft
    assert [(a["prompt_tokens"], a["policy"]) for a in result["arms"]] == [
        (100, "cost"),
        (100, "rule"),
        (150, "cost"),
        (150, "rule"),
    ]
    for arm in result["arms"]:
        assert arm["ttft_ms"] > 0 and len(arm["ttft_runs_ms"]) == 2
        assert len(arm["launches"]) == arm["launch_count"] > 0
        assert all(l["ms"] > 0 for l in arm["launches"])
        assert arm["launches"][-1]["end"] == arm["prompt_tokens"]
        # one statistic: the launches and their sum are the median run's, the run ttft_ms reports
        assert arm["launch_sum_ms"] == pytest.approx(sum(l["ms"] for l in arm["launches"]))
        assert arm["ttft_ms"] in arm["ttft_runs_ms"]


def test_the_harness_prediction_comes_from_the_same_catalog(ttft):
    result, _ = ttft
    ms = {g["prefill"]: g["ms"] for g in result["catalog"]}
    for arm in result["arms"]:
        assert arm["predicted_ms"] == pytest.approx(sum(ms[g] for g in arm["graphs"]))
        assert arm["table_ms"] == pytest.approx(arm["predicted_ms"])  # no drift: belief and table agree


def test_every_executed_launch_is_streamed(ttft):
    result, events = ttft
    launches = [e for e in events if e["type"] == "launch"]
    assert len(launches) == sum(a["launch_count"] for a in result["arms"])
    assert {"policy", "prompt_tokens", "graph", "start", "end", "padding", "ms", "predicted_ms"} <= set(launches[0])


def test_the_same_prompt_samples_the_same_first_token_under_both_policies(ttft):
    arms = ttft[0]["arms"]
    assert arms[0]["first_token"] == arms[1]["first_token"] and arms[2]["first_token"] == arms[3]["first_token"]


def test_a_given_catalog_is_what_the_plans_are_made_from():
    catalog = [{"prefill": 16, "decode": 0, "ms": 1.0}, {"prefill": 64, "decode": 0, "ms": 50.0}]
    params = TTFT.validate(
        {
            "boot_catalog": catalog,
            "repeats": 2,
            "runs": 1,
            "prompt_tokens": [100],
            "policies": ["cost"],
            "device": "cpu",
        }
    )
    result = TTFT.run(params, lambda e: None)
    assert result["planning_catalog_source"] == "given"
    assert [g["prefill"] for g in result["catalog"]] == [16, 64]
    assert result["arms"][0]["graphs"] == [16] * 7 and result["arms"][0]["predicted_ms"] == 7.0


def test_a_drifted_boot_plans_with_its_drifted_catalog_and_costs_the_launches_undisturbed_too():
    params = TTFT.validate(
        {
            "capacities": [16, 64],
            "drift_capacities": [64],
            "repeats": 2,
            "runs": 1,
            "prompt_tokens": [100],
            "policies": ["rule"],
            "device": "cpu",
        }
    )
    result = TTFT.run(params, lambda e: None)
    believed = {m["prefill"]: m["median_ms"] for m in result["measurements"]}
    undisturbed = {m["prefill"]: m.get("clean_median_ms", m["median_ms"]) for m in result["measurements"]}
    [arm] = result["arms"]
    assert arm["graphs"] == [64, 64]
    assert arm["predicted_ms"] == pytest.approx(2 * believed[64])
    assert arm["table_ms"] == pytest.approx(2 * undisturbed[64])
    assert f"{arm['table_ms']:.2f}" in TTFT.format_text(result)


def test_the_text_report_has_a_row_per_arm_with_its_measured_ttft(ttft):
    result, _ = ttft
    text = TTFT.format_text(result)
    assert "eager-cpu" in text
    for arm in result["arms"]:
        assert f"{arm['ttft_ms']:.2f}" in text and ",".join(map(str, arm["graphs"])) in text
        assert f"{arm['predicted_ms']:>10.2f} {arm['table_ms']:>11.2f}" in text


def test_every_event_is_a_record_ttft_declares(ttft):
    from scheduler_core.events import conforms

    _, events = ttft
    for event in events:
        conforms(event, TTFT.events)
    assert {e["shape"] for e in events if e["type"] == "measurement"} == {"prefill 16", "prefill 32", "prefill 64"}


def test_the_runs_and_the_boot_say_what_load_they_ran_beside(ttft):
    result, _ = ttft
    for load in (result["ttft_conditions"]["host_load"], result["provenance"]["host_load"]):
        for when in ("before", "after"):
            assert len(load[when]["load_average"]) == 3 and load[when]["cores"] >= 1
    assert result["ttft_conditions"]["runs"] == 2 and result["provenance"]["repeats"] == 2
    text = TTFT.format_text(result)
    assert "2 runs per arm" in text and f"on {result['ttft_conditions']['host_load']['before']['cores']} cores" in text
