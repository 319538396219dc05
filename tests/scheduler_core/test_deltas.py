"""The two "p50 deltas", computed here from the per-request figures by their definitions and held
against what the product reports under each name; results stored before the names still read."""

import math

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.comparison import Pair
from scheduler_core.deltas import DIFFERENCE_OF_PERCENTILES, PERCENTILE_OF_DIFFERENCES, capacity_differences
from scheduler_core.tradeoff import Evidence, Subject, tradeoff


def rank(values, q):
    """Nearest-rank percentile, written out here rather than imported."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@pytest.fixture(scope="module")
def simulated():
    simulate = ANALYSES["simulate"]
    return simulate.run(simulate.validate({"requests": 400, "rate_per_s": 12.0, "seed": 5}), lambda e: None)


def test_simulate_reports_both_deltas_each_under_its_name(simulated):
    ttft = {p["policy"]: {r["id"]: r["ttft_ms"] for r in p["per_request"]} for p in simulated["policies"]}
    rule, cost = ttft["rule"], ttft["cost"]
    deltas = simulated["deltas"]
    assert deltas["definition"] == PERCENTILE_OF_DIFFERENCES
    other = deltas["difference_of_percentiles"]
    assert other["definition"] == DIFFERENCE_OF_PERCENTILES
    for q in (50, 90, 99):
        per_request = rank([rule[i] - cost[i] for i in rule], q)
        of_percentiles = rank(rule.values(), q) - rank(cost.values(), q)
        assert deltas[f"p{q}"] == pytest.approx(per_request, abs=1e-5)
        assert other[f"p{q}"] == pytest.approx(of_percentiles, abs=1e-5)
    assert deltas["p99"] != pytest.approx(other["p99"], abs=0.01), "on this traffic the two differ: names matter"
    text = ANALYSES["simulate"].format_text(simulated)
    assert f"rule − cost, {PERCENTILE_OF_DIFFERENCES}: p50 {deltas['p50']:+.2f}" in text
    assert f"rule − cost, {DIFFERENCE_OF_PERCENTILES}: p50 {other['p50']:+.2f}" in text


def test_capacity_names_its_difference_of_percentiles_and_still_reads_the_old_keys():
    capacity = ANALYSES["capacity"]
    params = {"requests": 80, "rate_min_per_s": 2.0, "rate_max_per_s": 8.0, "steps": 2, "repeats": 2}
    result = capacity.run(capacity.validate(params), lambda e: None)
    points = {p["policy"]: p["points"] for p in result["policies"]}
    for i, row in enumerate(result["deltas"]):
        assert [(c["before"], c["after"]) for c in row["comparisons"]] == [("cost", "rule"), ("rule", "cost")]
        for c in row["comparisons"]:  # every ordered pair, computed here from the points it compares
            assert c["definition"] == DIFFERENCE_OF_PERCENTILES and "ttft_p50_ms" not in c
            after, before = points[c["after"]][i]["ttft_p50_ms"], points[c["before"]][i]["ttft_p50_ms"]
            assert c["difference_of_ttft_p50_ms"]["mean"] == pytest.approx(after["mean"] - before["mean"], abs=1e-5)
            assert c["per_request"]["definition"] == PERCENTILE_OF_DIFFERENCES

    # a result stored before: old delta keys, and points without the draws the trade-off pairs by seed
    old = {
        **result,
        "deltas": [
            {**row, "comparisons": [_as_stored_before(c) for c in row["comparisons"]]} for row in result["deltas"]
        ],
        "policies": [
            {**p, "points": [{k: v for k, v in point.items() if k != "draws"} for point in p["points"]]}
            for p in result["policies"]
        ],
    }
    assert [capacity_differences(c) for row in old["deltas"] for c in row["comparisons"]] == [
        capacity_differences(c) for row in result["deltas"] for c in row["comparisons"]
    ]
    parts = [
        tradeoff([Evidence(1, "capacity", "r", params, r)], subject=Subject("r", ""), pair=Pair("cost", "rule"))
        for r in (result, old)
    ]
    [new_part], [old_part] = parts[0]["capacity"], parts[1]["capacity"]
    assert new_part["deltas"] == old_part["deltas"] != []


def _as_stored_before(row):
    """A comparison as results held it before the two deltas were named apart."""
    out = {k: v for k, v in row.items() if k not in ("definition", "queueing") and not k.startswith("difference_of")}
    if "difference_of_ttft_p50_ms" in row:
        out |= {"ttft_p50_ms": row["difference_of_ttft_p50_ms"], "ttft_p99_ms": row["difference_of_ttft_p99_ms"]}
    return out
