"""capacity: the highest rate meeting an SLO per policy, narrowed by a search to a stated resolution,
goodput and attainment per rate, repeats with intervals where traffic is random, a capacity that can
only fall as the SLO tightens; rates centred on a trace's own, runs too large refused naming what to
lower, and a 20,000-request trace at the defaults."""

import re
from pathlib import Path

import pytest

from scheduler_core.analyses import ANALYSES, capacity, pacing
from scheduler_core.comparison import Pair, deltas_of
from scheduler_core.errors import InvalidInput
from scheduler_core.traffic import from_records, read_trace

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


def test_capacity_is_narrowed_between_the_last_stepped_rate_met_and_the_first_missed(trace):
    result = run(trace=trace, limit=400, rate_min_per_s=0.5, rate_max_per_s=40.0, steps=6)
    assert result["rates_per_s"][0] == 0.5 and result["rates_per_s"][-1] == 40.0
    for p in result["policies"]:
        verdicts = [pt["meets_slo"] for pt in p["points"]]
        stepped = next(i for i, met in enumerate(verdicts) if not met)  # the SLO is missed at 40/s
        assert all(verdicts[:stepped]) and stepped > 0
        met, missed = p["capacity_per_s"], p["first_missed_per_s"]
        assert result["rates_per_s"][stepped - 1] <= met < missed <= result["rates_per_s"][stepped]
        assert missed / met <= 1 + result["resolution"], "the search narrowed to the stated resolution"
        searched = {pt["rate_per_s"]: pt for pt in p["search"]}
        assert len(searched) == len(p["search"]) > 0
        for rate, pt in [*searched.items(), *((pt["rate_per_s"], pt) for pt in p["points"])]:
            if rate in (met, missed):
                assert pt["meets_slo"] == (rate == met)
            assert pt["meets_slo"] == (
                pt["ttft_p99_ms"]["mean"] <= result["slo"]["ttft_p99_ms"]
                and pt["itl_p99_ms"]["mean"] <= result["slo"]["itl_p99_ms"]
                and not pt["overloaded"]
            )
            assert 0.0 <= pt["attainment"]["mean"] <= 1.0
            assert pt["goodput_per_s"]["mean"] <= pt["rate_per_s"] * 1.5  # bursts aside, never far above the offer
    coarse = run(trace=trace, limit=400, rate_min_per_s=0.5, rate_max_per_s=40.0, steps=6, resolution=0)
    for p, q in zip(coarse["policies"], result["policies"]):
        assert p["search"] == [] and p["points"] == q["points"]
        assert p["capacity_per_s"] <= q["capacity_per_s"]


def test_a_trace_s_rates_are_centred_on_its_own_rate(trace):
    result = run(trace=trace, limit=300, resolution=0)
    native = result["traffic"]["native_rate_per_s"]
    assert result["rates_per_s"][2] == pytest.approx(native, rel=1e-5)
    assert result["rates_per_s"][0] == pytest.approx(native / 4, rel=1e-5)
    assert result["rates_per_s"][-1] == pytest.approx(native * 4, rel=1e-5)
    poisson = CAPACITY.validate({})
    assert capacity.rate_range(poisson) == (0.1, 8.0)


def test_a_run_too_large_names_the_parameter_to_lower_and_the_largest_value_that_fits(trace):
    huge = {"trace": tiled(trace, 60_000), "steps": 64}
    with pytest.raises(InvalidInput) as caught:
        CAPACITY.validate(huge)
    assert caught.value.field == "limit"
    fits = int(re.search(r"set limit to at most ([\d,]+)", caught.value.message)[1].replace(",", ""))
    assert capacity.work(CAPACITY.validate({**huge, "limit": fits})) <= capacity.MAX_WORK
    with pytest.raises(InvalidInput):
        CAPACITY.validate({**huge, "limit": fits + 1})
    with pytest.raises(InvalidInput) as caught:
        CAPACITY.validate({"requests": 20_000, "output_max": 5000, "steps": 40})
    assert caught.value.field == "requests" and "set requests to at most" in caught.value.message


def test_progress_reaches_into_each_run_so_a_cancel_stops_it_there(trace, monkeypatch):
    # every due tick emitted: the 50 ms pacing would make this depend on how fast the machine runs
    monkeypatch.setattr(pacing.Ticker.__init__, "__defaults__", (0.0,))

    class Cancelled(Exception):
        pass

    seen = []

    def emit(event):
        seen.append(event)
        if event["type"] == "progress" and 0 < event["done"] < 300:
            raise Cancelled  # what the job's pump does once a cancel is asked

    with pytest.raises(Cancelled):
        CAPACITY.run(CAPACITY.validate({"trace": trace, "limit": 300, "steps": 2}), emit)
    assert seen[-1]["done"] < 300 and seen[-1]["total"] >= 2 * 2 * 300


@pytest.mark.slow
def test_capacity_runs_on_a_20000_request_trace_at_its_defaults_in_both_policies(trace):
    big = tiled(trace, 20_000)
    params = CAPACITY.validate({"trace": big})  # refused before at 40,000,000 work units
    assert params["policies"] == ["cost", "rule"] and len(big) == 20_000
    events = []
    result = CAPACITY.run(params, events.append)
    progress = [e for e in events if e["type"] == "progress"]
    assert [e["done"] for e in progress] == sorted(e["done"] for e in progress)
    assert progress[-1]["done"] == progress[-1]["total"]
    assert result["traffic"]["requests"] == 20_000
    for p in result["policies"]:
        met, missed = p["capacity_per_s"], p["first_missed_per_s"]
        assert met is not None and missed is not None and missed / met <= 1 + result["resolution"]
    assert result["rates_per_s"][2] == pytest.approx(big.rate_per_s(), rel=1e-5)  # centred on its own rate
    compared = [c for row in result["deltas"] for c in row["comparisons"]]
    assert len(compared) == 2 * len(result["rates_per_s"])  # each ordered pair of the two, at every rate
    assert all(c["definition"] and c["per_request"]["requests"] == 20_000 for c in compared)


def tiled(trace, n):
    """`trace` repeated end to end (each copy one mean gap after the last) up to `n` requests."""
    gap = trace.arrival_ms[-1] / (len(trace) - 1)
    copies = -(-n // len(trace))
    rows = [
        (a + k * (trace.arrival_ms[-1] + gap), p, o)
        for k in range(copies)
        for a, p, o in zip(trace.arrival_ms, trace.prompt_tokens, trace.output_tokens)
    ][:n]
    return from_records(
        [{"arrival_ms": a, "prompt_tokens": p, "output_tokens": o} for a, p, o in rows], name=f"{trace.name} x{copies}"
    )


def test_a_trace_runs_once_and_says_it_is_deterministic(trace):
    first = run(trace=trace, limit=200, steps=2, repeats=5)
    assert first["repeats"] == 1 and first["randomness"].startswith("none")
    assert all(pt["ttft_p99_ms"]["n"] == 1 for p in first["policies"] for pt in p["points"])
    assert run(trace=trace, limit=200, steps=2, repeats=5) == first
    for c in (c for row in first["deltas"] for c in row["comparisons"]):
        assert c["difference_of_ttft_p50_ms"]["low"] == c["difference_of_ttft_p50_ms"]["high"]
        assert len(c["per_request"]["worst"]) == 20


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
    delta = deltas_of(result["deltas"][1]["comparisons"], Pair("cost", "rule"))["difference_of_ttft_p50_ms"]
    assert delta["mean"] == pytest.approx(sum(r - c for r, c in zip(p50["rule"], p50["cost"])) / 3, abs=1e-5)
    assert delta["n"] == 3


def test_bad_ranges_are_refused():
    with pytest.raises(InvalidInput) as caught:
        CAPACITY.validate({"rate_min_per_s": 9.0, "rate_max_per_s": 1.0})
    assert caught.value.field == "rate_min_per_s"
    with pytest.raises(InvalidInput) as caught:
        CAPACITY.validate({"itl_p99_ms": -1})
    assert caught.value.field == "itl_p99_ms"
