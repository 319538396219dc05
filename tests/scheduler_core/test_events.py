"""Every event an analysis emits is one of the records it declares (scheduler_core.events)."""

from __future__ import annotations

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.errors import InvalidInput
from scheduler_core.events import ProgressEvent, conforms


@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_every_emitted_event_is_a_declared_record(name):
    analysis = ANALYSES[name]
    events: list[dict] = []
    analysis.run(analysis.validate(analysis.example), events.append)
    assert events, "an analysis reports at least its progress"
    for event in events:
        conforms(event, analysis.events)
    declared = {r.__name__ for r in analysis.events}
    assert "ProgressEvent" in declared


def test_an_event_with_a_missing_or_extra_field_or_an_undeclared_type_is_named():
    with pytest.raises(InvalidInput) as missing:
        conforms({"type": "progress", "done": 1, "total": 2}, [ProgressEvent])
    assert missing.value.field == "message"
    with pytest.raises(InvalidInput) as extra:
        conforms({"type": "progress", "done": 1, "total": 2, "message": "", "launches": 3}, [ProgressEvent])
    assert extra.value.field == "launches"
    with pytest.raises(InvalidInput) as undeclared:
        conforms({"type": "arm_result"}, [ProgressEvent])
    assert undeclared.value.field == "type"


def test_simulate_reports_each_policy_as_a_policy_result_with_its_itl_distribution():
    analysis = ANALYSES["simulate"]
    events: list[dict] = []
    params = analysis.validate(analysis.example)
    result = analysis.run(params, events.append)
    summaries = [e for e in events if e["type"] == "policy_result"]
    assert [e["policy"] for e in summaries] == params["policies"] == [p["policy"] for p in result["policies"]]
    for summary, policy in zip(summaries, result["policies"]):
        quantiles = summary["itl_quantiles_ms"]
        assert len(quantiles) == 101 and quantiles == sorted(quantiles)
        assert quantiles[-1] == policy["itl_ms"]["max"] and quantiles[50] == policy["itl_ms"]["p50"]


def test_pr22_stores_each_plans_launches_whose_true_times_sum_to_its_ttft():
    analysis = ANALYSES["pr22"]
    result = analysis.run(analysis.validate({}), lambda e: None)
    first_token = result["execution"]["first_token_ms"]
    for arm in result["arms"]:
        for policy in ("cost", "rule"):
            side = arm[policy]
            assert [c["graph"] for c in side["chunks"]] == side["graphs"]
            assert side["chunks"][-1]["end"] == arm["prompt_tokens"]
            assert sum(c["true_ms"] for c in side["chunks"]) + first_token == pytest.approx(side["ttft_ms"])
