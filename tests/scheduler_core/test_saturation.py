"""A serving run whose queue still grows when its traffic ends is marked overloaded, with the rate it
sustained, and its TTFT comparison is read as queueing; one that keeps up is not marked."""

import pytest

from scheduler_core import saturation
from scheduler_core.analyses import ANALYSES
from scheduler_core.comparison import deltas_of, ordered_pairs
from scheduler_core.saturation import judge, overloaded_runs

SIMULATE = ANALYSES["simulate"]


def simulate(rate):
    return SIMULATE.run(SIMULATE.validate({"requests": 300, "rate_per_s": rate, "launch_events": 0}), lambda e: None)


def test_a_queue_that_grows_to_the_end_is_overloaded_at_the_rate_it_sustained():
    arrivals = [i * 100.0 for i in range(200)]  # 10 requests/s offered
    firsts = [i * 200.0 + 50.0 for i in range(200)]  # one first token every 200 ms: 5/s served
    load = judge(arrivals, firsts)
    assert load.judged and load.overloaded
    assert load.offered_per_s == pytest.approx(10.0, rel=0.02)
    assert load.sustained_per_s == pytest.approx(5.0, rel=0.05)
    assert load.backlog_at_end == 100  # 200 arrived by 19.9 s, 100 first tokens by then (the last at 19.85 s)


def test_a_run_that_keeps_up_or_drains_a_burst_before_the_end_is_not():
    arrivals = [i * 100.0 for i in range(200)]
    assert not judge(arrivals, [a + 30.0 for a in arrivals]).overloaded
    burst = sorted(arrivals + [10_000.0] * 50)  # 50 extra at mid-run, served by 14 s
    firsts = [a + 30.0 for a in arrivals] + [10_000.0 + 80.0 * i for i in range(50)]
    load = judge(burst, firsts)
    assert load.judged and not load.overloaded


def test_too_few_requests_or_no_span_are_not_judged():
    assert judge([0.0, 1.0], [5.0, 6.0]) == saturation.Load(False, False, None, None, 0, 0)
    assert not judge([0.0] * 50, [1.0] * 50).judged


def test_an_overloaded_simulate_is_marked_and_an_underloaded_one_is_not():
    over, under = simulate(40.0), simulate(5.0)
    for p in over["policies"]:
        load = p["load"]
        assert load["overloaded"] and load["sustained_per_s"] < 0.5 * load["offered_per_s"]
        ttft = [r["ttft_ms"] for r in sorted(p["per_request"], key=lambda r: r["arrival_ms"])]
        assert sum(ttft[-30:]) > 5 * sum(ttft[:30]), "the last requests waited far longer: the queue grew"
    assert over["deltas"]["queueing"] is True
    text = SIMULATE.format_text(over)
    assert "OVERLOADED" in text and saturation.QUEUEING in text
    assert len(overloaded_runs(over)) == len(over["policies"])

    for p in under["policies"]:
        assert p["load"]["judged"] and not p["load"]["overloaded"]
        assert p["load"]["sustained_per_s"] == pytest.approx(p["load"]["offered_per_s"], rel=0.1)
    assert under["deltas"]["queueing"] is False
    assert "OVERLOADED" not in SIMULATE.format_text(under) and overloaded_runs(under) == []


def test_capacity_marks_the_rates_at_which_a_policy_was_overloaded():
    capacity = ANALYSES["capacity"]
    params = {"requests": 300, "rate_min_per_s": 5.0, "rate_max_per_s": 40.0, "steps": 2, "repeats": 1}
    result = capacity.run(capacity.validate(params), lambda e: None)
    for p in result["policies"]:
        low, high = p["points"]
        assert not low["overloaded"] and high["overloaded"]
        assert high["sustained_per_s"] < 0.5 * high["rate_per_s"]
        assert not high["meets_slo"], "a rate the run could not keep up with is no capacity, whatever its p99"
    for pair in ordered_pairs(["cost", "rule"]):
        assert [deltas_of(row["comparisons"], pair)["queueing"] for row in result["deltas"]] == [False, True]
    assert "overloaded: queueing, not the policy" in capacity.format_text(result)
