"""capacity: the highest rate meeting an SLO per policy, goodput and attainment per rate, repeats
with intervals where traffic is random, and a capacity that can only fall as the SLO tightens."""

from pathlib import Path

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.errors import InvalidInput
from scheduler_core.traffic import read_trace

AZURE = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces" / "azure-llm-2023-code.csv"
CAPACITY = ANALYSES["capacity"]


def run(**params):
    return CAPACITY.run(CAPACITY.validate(params), lambda event: None)


@pytest.fixture(scope="module")
def trace():
    return read_trace(str(AZURE))


def test_capacity_never_rises_as_the_slo_tightens(trace):
    slos = [(4000.0, 400.0), (1000.0, 100.0), (400.0, 60.0), (150.0, 30.0), (50.0, 5.0)]
    common = {"trace": trace, "limit": 400, "rate_min_per_s": 0.5, "rate_max_per_s": 40.0, "steps": 6}
    results = [run(ttft_p99_ms=t, itl_p99_ms=i, **common) for t, i in slos]
    for policy in ("cost", "rule"):
        caps = [next(p for p in r["policies"] if p["policy"] == policy)["capacity_per_s"] or 0.0 for r in results]
        assert caps == sorted(caps, reverse=True), (policy, caps)
        assert caps[0] > 0 and caps[-1] == 0.0, "the SLOs span the loose and the impossible"
        attained = [
            [pt["attainment"]["mean"] for pt in next(p for p in r["policies"] if p["policy"] == policy)["points"]]
            for r in results
        ]
        for looser, tighter in zip(attained, attained[1:]):
            assert all(t <= lo for lo, t in zip(looser, tighter))


def test_capacity_is_the_last_rate_of_an_unbroken_run_of_passes(trace):
    result = run(trace=trace, limit=400, rate_min_per_s=0.5, rate_max_per_s=40.0, steps=6)
    assert result["rates_per_s"][0] == 0.5 and result["rates_per_s"][-1] == 40.0
    for p in result["policies"]:
        verdicts = [pt["meets_slo"] for pt in p["points"]]
        cap = p["capacity_per_s"]
        upto = 0 if cap is None else result["rates_per_s"].index(cap) + 1
        assert all(verdicts[:upto]) and (upto == len(verdicts) or not verdicts[upto])
        for pt in p["points"]:
            assert pt["meets_slo"] == (
                pt["ttft_p99_ms"]["mean"] <= result["slo"]["ttft_p99_ms"]
                and pt["itl_p99_ms"]["mean"] <= result["slo"]["itl_p99_ms"]
            )
            assert 0.0 <= pt["attainment"]["mean"] <= 1.0
            assert pt["goodput_per_s"]["mean"] <= pt["rate_per_s"] * 1.5  # bursts aside, never far above the offer


def test_a_trace_runs_once_and_says_it_is_deterministic(trace):
    first = run(trace=trace, limit=200, steps=2, repeats=5)
    assert first["repeats"] == 1 and first["randomness"].startswith("none")
    assert all(pt["ttft_p99_ms"]["n"] == 1 for p in first["policies"] for pt in p["points"])
    assert run(trace=trace, limit=200, steps=2, repeats=5) == first
    for row in first["deltas"]:
        assert row["ttft_p50_ms"]["low"] == row["ttft_p50_ms"]["high"]
        assert len(row["per_request"]["worst"]) == 20


def test_poisson_repeats_give_intervals_paired_by_seed():
    result = run(requests=60, steps=2, repeats=3, rate_min_per_s=2.0, rate_max_per_s=20.0, seed=7)
    assert result["repeats"] == 3 and "seeds 7..9" in result["randomness"]
    simulate = ANALYSES["simulate"]
    p50 = {}
    for policy in ("cost", "rule"):
        runs = [
            simulate.run(
                simulate.validate({"requests": 60, "rate_per_s": 20.0, "seed": seed, "policies": [policy]}),
                lambda e: None,
            )
            for seed in (7, 8, 9)
        ]
        p50[policy] = [r["policies"][0]["ttft_ms"]["p50"] for r in runs]
        point = next(p for p in result["policies"] if p["policy"] == policy)["points"][1]
        assert point["ttft_p50_ms"]["mean"] == pytest.approx(sum(p50[policy]) / 3, abs=1e-5)
        assert point["ttft_p50_ms"]["low"] <= point["ttft_p50_ms"]["mean"] <= point["ttft_p50_ms"]["high"]
    delta = result["deltas"][1]["ttft_p50_ms"]
    assert delta["mean"] == pytest.approx(sum(r - c for r, c in zip(p50["rule"], p50["cost"])) / 3, abs=1e-5)
    assert delta["n"] == 3


def test_bad_ranges_are_refused():
    with pytest.raises(InvalidInput) as caught:
        CAPACITY.validate({"rate_min_per_s": 9.0, "rate_max_per_s": 1.0})
    assert caught.value.field == "rate_min_per_s"
    with pytest.raises(InvalidInput) as caught:
        CAPACITY.validate({"itl_p99_ms": -1})
    assert caught.value.field == "itl_p99_ms"
