import json

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.analyses.simulate import ANALYSIS, build_catalog, format_text, traffic
from scheduler_core.errors import InvalidInput, Stalled
from scheduler_core.execution import AffineExecution
from scheduler_core.planner import plan


def run(**overrides):
    events = []
    result = ANALYSIS.run(ANALYSIS.validate({"requests": 60, **overrides}), events.append)
    return result, events


def test_it_is_registered_as_an_analysis():
    assert ANALYSES["simulate"] is ANALYSIS


def test_it_compares_every_chosen_policy_on_the_same_traffic():
    result, _ = run(policies=["cost", "rule"])
    assert [p["policy"] for p in result["policies"]] == ["cost", "rule"]
    for summary in result["policies"]:
        assert summary["stalled"] is None and summary["finished"] == 60
        assert [r["id"] for r in summary["per_request"]] == list(range(60))
        assert (
            summary["ttft_ms"]["p50"]
            <= summary["ttft_ms"]["p90"]
            <= summary["ttft_ms"]["p99"]
            <= summary["ttft_ms"]["max"]
        )
        assert summary["launches"]["init"] == 60
        assert summary["launches"]["total"] == sum(v for k, v in summary["launches"].items() if k != "total")
    assert json.loads(json.dumps(result)) == result


def test_it_is_reproducible_for_a_seed_and_varies_with_it():
    assert run(seed=3)[0] == run(seed=3)[0]
    assert run(seed=3)[0] != run(seed=4)[0]


def test_it_reports_progress_up_to_the_total_and_a_few_launch_events():
    _, events = run(policies=["cost", "rule"], launch_events=5)
    progress = [e for e in events if e["type"] == "progress"]
    assert progress[0]["done"] == 0 and progress[-1]["done"] == progress[-1]["total"] == 120
    assert all(a["done"] <= b["done"] for a, b in zip(progress, progress[1:]))
    launches = [e for e in events if e["type"] == "launch"]
    assert [(e["policy"], e["index"]) for e in launches] == [(p, i) for p in ("cost", "rule") for i in range(5)]


def test_it_reports_the_pre_fix_rule_stall_with_its_request_and_position():
    params = ANALYSIS.validate(
        {"requests": 60, "policies": ["rule", "rule-v1"], "catalog": "unmeasured-full", "span_share": 0.5}
    )
    result = ANALYSIS.run(params, lambda event: None)
    rule, rule_v1 = result["policies"]
    assert rule["stalled"] is None and rule["finished"] == 60
    assert rule_v1["stalled"] is not None and rule_v1["finished"] < 60
    stalled = traffic(params, 4096)[rule_v1["stalled"]["request"]]
    with pytest.raises(Stalled) as excinfo:
        plan("rule-v1", build_catalog(params, AffineExecution()), stalled.request)
    assert rule_v1["stalled"]["position"] == excinfo.value.position
    assert "STALLED request" in format_text(result)


def test_the_rule_pads_more_prefill_tokens_than_the_measured_catalog():
    # The pull request's trade: the rule pads a tail to one covering graph, cost splits it.
    cost, rule = run(policies=["cost", "rule"])[0]["policies"]
    assert rule["padded_prefill_tokens"] > cost["padded_prefill_tokens"]


def test_traffic_draws_lengths_inside_the_declared_ranges_and_spans_no_longer_than_the_full_chunk():
    params = ANALYSIS.validate(
        {"requests": 300, "prompt_min": 100, "prompt_max": 9000, "output_min": 3, "output_max": 7, "span_share": 0.5}
    )
    arrivals = traffic(params, 4096)
    assert all(100 <= a.request.prompt_tokens <= 9000 and 3 <= a.output_tokens <= 7 for a in arrivals)
    assert all(a.arrival_ms < b.arrival_ms for a, b in zip(arrivals, arrivals[1:]))
    spans = [s for a in arrivals for s in a.request.atomic_spans]
    assert spans and all(0 < end - start <= 4096 for start, end in spans)


def test_the_catalog_holds_decode_and_mixed_graphs_and_perturbs_only_the_full_prefill_graph():
    execution = AffineExecution()
    params = ANALYSIS.validate({"catalog": "drift", "mixed_rows": [8]})
    catalog = build_catalog(params, execution)
    assert {g.kind for g in catalog.graphs} == {"prefill", "decode", "mixed"}
    assert catalog.graph(4096, 0).ms == pytest.approx(1.6 * execution.launch_ms(4096, 0))
    assert catalog.graph(4096, 8).ms == execution.launch_ms(4096, 8)


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"prompt_min": 500, "prompt_max": 100}, "prompt_min"),
        ({"output_min": 9, "output_max": 8}, "output_min"),
        ({"requests": 20_000, "output_max": 100_000}, "requests"),
        ({"policies": ["fastest"]}, "policies[]"),
        ({"max_lanes": 65}, "max_lanes"),
    ],
)
def test_it_rejects_bad_or_hours_long_runs_before_running(overrides, field):
    with pytest.raises(InvalidInput) as excinfo:
        ANALYSIS.validate(overrides)
    assert excinfo.value.field == field
