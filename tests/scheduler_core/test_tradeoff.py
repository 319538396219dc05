import json
from pathlib import Path

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.analyses.replay import from_engine_records
from scheduler_core.catalog import Catalog, drift
from scheduler_core.comparison import Pair, deltas_of
from scheduler_core.errors import InvalidInput
from scheduler_core.evidence import Subject
from scheduler_core.execution import AffineExecution, measured_catalog
from scheduler_core.policies import selectable_policies
from scheduler_core.tradeoff import (
    CHECKLIST_ITEMS,
    SPREAD_BOUND,
    Evidence,
    StoredBoot,
    missing,
    parse_required,
)
from scheduler_core.tradeoff import tradeoff as summarise
from scheduler_core.traffic import read_trace

from .test_replay import engine_requests

CLEAN = measured_catalog(AffineExecution())
AZURE = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces" / "azure-llm-2023-code.csv"


def job(job_id, kind, recipe="tiny-cpu", **params):
    analysis = ANALYSES[kind]
    clean = analysis.validate(params)  # evidence is stored jobs: their params as stored (JSON)
    return Evidence(job_id, kind, recipe, analysis.to_json(clean), analysis.run(clean, lambda e: None))


def tradeoff(evidence, *, recipe, to_policy, boots=(), hardware=""):
    """The trade-off of a `cost -> to_policy` decision on `recipe`."""
    return summarise(evidence, subject=Subject(recipe, hardware), pair=Pair("cost", to_policy), boots=boots)


def only(summary, kind):
    """The one part of `kind` (one job of it cited)."""
    [part] = summary[kind]
    return part


def by_arm(summary):
    return {
        (row["arm"], row["catalog"]): {**row, "job": part["job"]} for part in summary["arms"] for row in part["rows"]
    }


def test_the_pull_requests_numbers_are_reproduced_with_the_repaired_catalog_beside_them():
    arms = by_arm(tradeoff([job(1, "pr22")], recipe="tiny-cpu", to_policy="rule"))
    expected = {  # the pull request: launches and TTFT before (cost) -> after (rule)
        ("3.5k", "clean"): ((3, 62.10), (1, 66.10)),
        ("3.5k", "drift"): ((3, 62.10), (1, 66.10)),
        ("14k", "clean"): ((6, 232.10), (4, 232.10)),
        ("14k", "drift"): ((9, 238.10), (4, 232.10)),
    }
    for key, ((cost_n, cost_ms), (rule_n, rule_ms)) in expected.items():
        row = arms[key]
        assert (row["cost"]["launches"], row["cost"]["ttft_ms"]) == (cost_n, pytest.approx(cost_ms))
        assert (row["rule"]["launches"], row["rule"]["ttft_ms"]) == (rule_n, pytest.approx(rule_ms))
        assert row["delta_ms"] == pytest.approx(rule_ms - cost_ms) and row["job"] == 1
    assert arms[("3.5k", "clean")]["rule"]["padded_tokens"] > arms[("3.5k", "clean")]["cost"]["padded_tokens"]
    # Fixing the drift would have been enough on 14k: the repaired catalog plans like the clean one.
    repaired = arms[("14k", "drift")]["repaired"]
    assert (repaired["launches"], repaired["ttft_ms"]) == (6, pytest.approx(232.10))
    assert [(r["prefill"], r["source"]) for r in repaired["replaced"]] == [(4096, "affine fit of this boot")]
    assert arms[("14k", "clean")]["repaired"]["replaced"] == []


def test_each_part_is_empty_until_evidence_covers_it():
    summary = tradeoff([], recipe="tiny-cpu", to_policy="rule")
    parts = ("arms", "sweep", "boots", "fuzz", "simulate", "capacity", "requests", "ttft", "numerics")
    assert all(summary[part] == [] for part in parts) and summary["health"] is None
    assert [row["item"] for row in summary["checklist"]] == list(CHECKLIST_ITEMS)
    assert not any(row["done"] for row in summary["checklist"])


def test_every_cited_job_of_a_kind_is_a_part_never_only_the_newest():
    evidence = [
        job(3, "sweep", count=16),
        job(7, "sweep", count=8),
        job(4, "boots", boots=3),
        job(5, "fuzz", cases=20),
        job(6, "simulate", requests=20),
    ]
    summary = tradeoff(evidence, recipe="tiny-cpu", to_policy="rule")
    sweeps = summary["sweep"]  # both cited sweeps, in citing order, each naming its job
    assert [(s["job"], s["source"]["job"], s["catalogs"]["drift"]["prompts"]) for s in sweeps] == [
        (3, 3, 16),
        (7, 7, 8),
    ]
    rule = only(summary, "boots")["policies"]["rule"]  # counted per prompt, never added up over the 3 prompts
    assert (rule["max_distinct_sequences"], rule["prompts_with_one_sequence"], rule["prompts"]) == (1, 3, 3)
    assert only(summary, "fuzz")["policies"]["rule"] == {"stalls": 0, "violations": 0}
    assert set(only(summary, "simulate")["policies"]) == set(selectable_policies())
    done = {row["item"]: row["jobs"] for row in summary["checklist"] if row["done"]}
    assert done == {"boots_compared": [4], "liveness_fuzzed": [5]}


def test_a_fuzz_run_that_stalls_the_proposed_policy_does_not_tick_liveness():
    evidence = [job(5, "fuzz", cases=40, policies=["rule-v1"])]
    rows = {r["item"]: r for r in tradeoff(evidence, recipe="r", to_policy="rule-v1")["checklist"]}
    assert rows["liveness_fuzzed"]["done"] is False


def test_a_run_on_the_recipes_stored_boots_ticks_the_per_recipe_item_and_shows_their_health():
    boots = [StoredBoot(i, c) for i, c in enumerate([CLEAN, CLEAN, drift(CLEAN, 4096, 1.6)], start=10)]
    evidence = [job(8, "boots", boot_catalogs=[b.catalog.to_dicts() for b in boots])]
    summary = tradeoff(evidence, recipe="tiny-cpu", to_policy="rule", boots=boots)
    rows = {r["item"]: r for r in summary["checklist"]}
    assert rows["recipe_run"] == {"item": "recipe_run", "label": rows["recipe_run"]["label"], "done": True, "jobs": [8]}
    assert [b["status"] for b in summary["health"]["boots"]] == ["ok", "ok", "flagged"]
    assert summary["health"]["flagged"] == 1
    other_recipe = tradeoff(
        [Evidence(8, "boots", "other", evidence[0].params, evidence[0].result)],
        recipe="tiny-cpu",
        to_policy="rule",
        boots=boots,
    )
    assert {r["item"]: r["done"] for r in other_recipe["checklist"]}["recipe_run"] is False


def test_gpu_evidence_reports_measured_against_predicted_and_the_device():
    ttft = {
        "provenance": {"device": "cpu", "mode": "eager"},
        "arms": [{"prompt_tokens": 256, "policy": "rule", "launch_count": 1, "ttft_ms": 5.5, "predicted_ms": 5.0}],
    }
    compared = {"bitwise_identical": False, "max_abs_diff": 0.001}
    numerics = {
        "provenance": {"device": "cpu", "mode": "eager"},
        "prompt_tokens": 256,
        "cost_vs_rule": compared,
        "vs_one_shot": {"cost": compared, "rule": compared},
        "reproducible": True,
    }
    evidence = [Evidence(1, "ttft", "r", {}, ttft), Evidence(2, "numerics", "r", {}, numerics)]
    summary = tradeoff(evidence, recipe="r", to_policy="rule")
    ttft = only(summary, "ttft")
    assert ttft["arms"][0]["measured_ms"] == 5.5 and ttft["device"] == "cpu (eager)"
    assert ttft["source"]["hardware"] == "cpu" and ttft["source"]["own"]
    assert only(summary, "numerics")["cost_vs_rule"] == compared
    done = {row["item"] for row in summary["checklist"] if row["done"]}
    assert done == {"recipe_run", "real_ttft", "numerics"}


def test_missing_names_required_items_still_open_in_checklist_order():
    rows = tradeoff([job(5, "fuzz", cases=10)], recipe="r", to_policy="rule")["checklist"]
    assert missing(rows, ["numerics", "liveness_fuzzed", "real_ttft"]) == ["real_ttft", "numerics"]
    assert missing(rows, ["liveness_fuzzed"]) == []


def test_required_items_must_be_known():
    assert parse_required(["numerics", "numerics"]) == ["numerics"]
    with pytest.raises(InvalidInput, match="unknown checklist item 'vibes'"):
        parse_required(["vibes"])
    with pytest.raises(InvalidInput):
        parse_required("numerics")


def test_unused_catalog_shapes_do_not_count_as_stored_boots():
    other = Catalog.from_dicts([{"prefill": 64, "decode": 0, "ms": 1.0}])
    evidence = [job(8, "boots", boot_catalogs=[other.to_dicts()] * 2)]
    summary = tradeoff(evidence, recipe="r", to_policy="rule", boots=[StoredBoot(1, CLEAN)])
    assert summary["health"] is None


def test_an_unreadable_stored_result_is_named_not_a_crash():
    summary = tradeoff(
        [Evidence(4, "pr22", "r", {}, {"arms": []}), Evidence(5, "sweep", "r", {}, {})], recipe="r", to_policy="rule"
    )
    assert only(summary, "arms")["job"] == 4 and "not readable" in only(summary, "arms")["error"]
    assert only(summary, "sweep")["job"] == 5 and "not readable" in only(summary, "sweep")["error"]


def test_a_pr22_job_on_a_gpu_profile_is_read_back_on_that_profile():
    arms = by_arm(tradeoff([job(1, "pr22", execution="llama-2-7b-a100")], recipe="tiny-cpu", to_policy="rule"))
    row = arms[("14k", "drift")]
    # the cost policy on the repaired catalog, planned on the job's own profile, not the affine model
    assert row["repaired"]["ttft_ms"] == pytest.approx(arms[("14k", "clean")]["cost"]["ttft_ms"])
    assert row["repaired"]["ttft_ms"] > 600  # A100: about 347 ms per 4,096-token chunk, not 66 ms


@pytest.fixture(scope="module")
def azure():
    return read_trace(str(AZURE))


def test_serving_evidence_gives_capacity_the_delta_with_its_interval_padding_ms_and_the_same_requests(azure):
    on_trace = job(8, "capacity", trace=azure, limit=600, rate_min_per_s=0.5, rate_max_per_s=20.0, steps=4)
    poisson = job(9, "capacity", requests=150, rate_min_per_s=1.0, rate_max_per_s=8.0, steps=3, repeats=4)
    simulated = job(10, "simulate", trace=azure, limit=600)
    summary = tradeoff([on_trace, simulated], recipe="r", to_policy="rule")
    cap = only(summary, "capacity")
    result = on_trace.result
    assert cap["job"] == 8 and cap["deterministic"] and cap["randomness"].startswith("deterministic")
    assert {p: c["capacity_per_s"] for p, c in cap["policies"].items()} == {
        p["policy"]: p["capacity_per_s"] for p in result["policies"]
    }
    assert [d["rate_per_s"] for d in cap["deltas"]] == result["rates_per_s"]
    for d, stored in zip(cap["deltas"], result["deltas"]):
        stored = deltas_of(stored["comparisons"], Pair("cost", "rule"))
        assert d["p50"] == stored["difference_of_ttft_p50_ms"] and d["p50"]["low"] == d["p50"]["high"]  # one run
    cost, rule = (next(p for p in result["policies"] if p["policy"] == name) for name in ("cost", "rule"))
    at = result["rates_per_s"].index(cap["padding_at_per_s"])
    assert cap["policies"]["rule"]["padded_prefill_ms"] == rule["points"][at]["padded_prefill_ms"]
    assert cost["points"][at]["meets_slo"] and rule["points"][at]["meets_slo"]
    # simulate on a trace: the delta of the percentiles, deterministic; padding in GPU-ms per policy
    sim = only(summary, "simulate")
    by_name = {p["policy"]: p for p in simulated.result["policies"]}
    assert sim["delta"]["p50"] == pytest.approx(by_name["rule"]["ttft_ms"]["p50"] - by_name["cost"]["ttft_ms"]["p50"])
    assert sim["delta"]["randomness"].startswith("deterministic")
    assert sim["policies"]["rule"]["padded_prefill_ms"] > sim["policies"]["cost"]["padded_prefill_ms"] > 0
    # the same requests: from every cited serving job (capacity #8 at its operating rate, simulate #10)
    from_capacity, requests = summary["requests"]
    assert from_capacity["job"] == 8 and from_capacity["rate_per_s"] == cap["padding_at_per_s"]
    assert requests["job"] == 10 and requests["kind"] == "simulate" and len(requests["cdf_ms"]) == 101
    stored = simulated.result["deltas"]["worst"]  # simulate's own rows for its first two, the same requests
    assert [(w["id"], w["delta_ms"]) for w in requests["worst"]] == [(w["id"], w["delta_ms"]) for w in stored]
    assert [w["after_ttft_ms"] for w in requests["worst"]] == [w["after_ttft_ms"] for w in stored]
    assert len(requests["worst"]) == 20
    # Poisson repeats: a real interval around the mean, and the capacity job's own per-request rows
    random = tradeoff([poisson], recipe="r", to_policy="rule")
    random_cap = only(random, "capacity")
    assert not random_cap["deterministic"] and random_cap["repeats"] == 4
    assert any(d["p50"]["low"] < d["p50"]["high"] for d in random_cap["deltas"])
    for d, stored_delta in zip(random_cap["deltas"], poisson.result["deltas"]):  # paired by seed, as capacity did
        stored_delta = deltas_of(stored_delta["comparisons"], Pair("cost", "rule"))
        assert d["p50"] == pytest.approx(stored_delta["difference_of_ttft_p50_ms"])
    random_requests = only(random, "requests")
    assert random_requests["kind"] == "capacity" and random_requests["rate_per_s"] is not None
    assert random_requests["draw"] == "the first of 4 seeded draws" and requests["draw"] is None


def test_a_ttft_measured_on_a_cpu_or_spread_wide_is_marked_indicative():
    def arm(runs):
        return {"prompt_tokens": 256, "policy": "rule", "launch_count": 1, "ttft_ms": sorted(runs)[1]}

    def ttft(mode, runs):
        arms = [{**arm(runs), "predicted_ms": 5.0, "ttft_runs_ms": runs}]
        result = {"provenance": {"device": "x", "mode": mode}, "arms": arms}
        return only(tradeoff([Evidence(1, "ttft", "r", {}, result)], recipe="r", to_policy="rule"), "ttft")

    steady = ttft("cuda-graph", [5.0, 5.1, 5.2])
    assert not steady["indicative"] and steady["arms"][0]["spread"] == pytest.approx(0.2 / 5.1, abs=1e-6)
    on_cpu = ttft("eager-cpu", [5.0, 5.1, 5.2])
    assert on_cpu["indicative"] and "not on a GPU" in on_cpu["why"]
    wide = ttft("cuda-graph", [5.0, 5.1, 5.0 * (1 + 2 * SPREAD_BOUND)])
    assert wide["indicative"] and wide["arms"][0]["indicative"] and "1 of 1 arms spread" in wide["why"]


def test_a_boots_result_stored_with_the_old_summed_layout_is_recounted_per_prompt():
    stored = job(4, "boots", boots=3)
    for o in stored.result["overall"].values():  # the layout before: prompts added up
        o.clear()
        o.update({"distinct_sequences": 3, "prompts_with_one_sequence": 3, "max_ttft_spread_ms": 0.0})
    rule = only(tradeoff([stored], recipe="tiny-cpu", to_policy="rule"), "boots")["policies"]["rule"]
    assert rule["max_distinct_sequences"] == 1 and "distinct_sequences" not in rule


def stored_ttft(job_id, *, measured, predicted, load, cores=2, recorded=True):
    """A ttft job's result as gpu_runner stores it (a real one needs torch; test_ttft.py runs it)."""
    arms = [
        {"prompt_tokens": n, "policy": p, "launch_count": 1, "ttft_ms": m, "predicted_ms": predicted,
         "ttft_runs_ms": [m * 0.9, m, m * 1.3]}
        for n, p, m in ((3504, "cost", measured), (3504, "rule", predicted * 1.1))
    ]  # fmt: skip
    host = None if load is None else {"before": {"load_average": [load, load, load], "cores": cores}}
    result = {"provenance": {"device": "cpu (2 threads)", "mode": "eager-cpu"}, "arms": arms}
    if recorded:  # a result stored before the conditions were recorded has none
        result["ttft_conditions"] = {"runs": 3, "host_load": host}
    return Evidence(job_id, "ttft", "tiny-cpu", {}, result)


def test_a_ttft_far_off_its_prediction_on_a_loaded_host_carries_a_caveat():
    c = tradeoff([stored_ttft(9, measured=312.2, predicted=62.1, load=7.9)], recipe="r", to_policy="rule")
    c = only(c, "ttft_conditions")
    assert (c["runs"], c["host_load"], c["loaded"]) == (3, {"load_average_1m": 7.9, "cores": 2}, True)
    assert [(a["policy"], a["off_percent"]) for a in c["off_prediction"]] == [("cost", 402.7)]  # rule: 10 %, within
    assert c["off_prediction"][0]["runs_ms"] == [pytest.approx(280.98), pytest.approx(405.86)]
    assert "loaded host (load average 7.90 on 2 cores)" in c["caveat"] and "not evidence" in c["caveat"]


def test_the_same_gap_on_an_idle_host_is_listed_without_blaming_the_load_and_unknown_load_is_said():
    idle = tradeoff([stored_ttft(9, measured=312.2, predicted=62.1, load=0.3)], recipe="r", to_policy="rule")
    idle = only(idle, "ttft_conditions")
    assert idle["loaded"] is False and "not evidence" not in idle["caveat"]
    old = tradeoff(
        [stored_ttft(9, measured=312.2, predicted=62.1, load=None, recorded=False)], recipe="r", to_policy="rule"
    )
    old = only(old, "ttft_conditions")
    assert old["conditions"] == "host load not recorded" and old["runs"] is None
    close = tradeoff([stored_ttft(9, measured=64.0, predicted=62.1, load=7.9)], recipe="r", to_policy="rule")
    close = only(close, "ttft_conditions")
    assert close["caveat"] is None and close["off_prediction"] == []


def replayed_job(job_id, policy="cost"):
    """A replay of what the simulated engine served under `policy` (its own request records)."""
    trace, served = from_engine_records(engine_requests(policy, 60), ["eng-1"] * 60)
    return job(job_id, "replay", trace=trace, served=[s.to_dict() for s in served])


def test_a_replay_sets_each_policy_beside_what_the_engine_served_and_feeds_the_same_requests():
    replay = replayed_job(12)
    result = replay.result
    summary = tradeoff([job(11, "simulate", requests=60), replay], recipe="tiny-cpu", to_policy="rule")
    part = only(summary, "replay")
    assert part["job"] == 12 and part["deterministic"] and part["randomness"].startswith("deterministic")
    assert part["requests"] == 60 and part["engines"] == ["eng-1"] and part["catalog"] == "clean"
    for row in result["table"]:  # each replayed policy's four figures, as the replay computed them
        mine = part["replayed"][row["policy"]]
        for key in ("ttft_p50_ms", "ttft_p99_ms", "prefill_launches", "padded_prefill_tokens"):
            assert mine[key] == row[key]
    # the engine ran cost: replayed cost repeats every served launch, and its figures are the served ones
    assert part["replayed"]["cost"]["reproduction"]["same_launches_share"] == 1.0
    assert part["replayed"]["rule"]["reproduction"] is None  # the engine never ran the rule
    served = part["served"]["cost"]
    assert served["prefill_launches"] == part["replayed"]["cost"]["prefill_launches"]
    assert served["padded_prefill_tokens"] == part["replayed"]["cost"]["padded_prefill_tokens"]
    assert served["ttft_p50_ms"] == pytest.approx(part["replayed"]["cost"]["ttft_p50_ms"], abs=1e-3)
    by_name = {p["policy"]: p for p in result["policies"]}
    assert part["delta"]["p50"] == pytest.approx(by_name["rule"]["ttft_ms"]["p50"] - by_name["cost"]["ttft_ms"]["p50"])
    # each serving job's own per-request deltas: the simulate's and the replay's, side by side
    simulated, requests = summary["requests"]
    assert simulated["job"] == 11 and requests["job"] == 12 and requests["kind"] == "replay"
    assert requests["rate_per_s"] is None and requests["catalog"] == "clean"
    assert [w["id"] for w in requests["worst"]] == [w["id"] for w in result["deltas"]["worst"]]
    assert requests["p99"] == result["deltas"]["p99"] and len(requests["cdf_ms"]) == 101


def test_a_replay_without_what_the_engine_served_shows_only_the_replayed_policies():
    rows = [{"arrival_ms": 40 * i, "prompt_tokens": 700 + 900 * i, "output_tokens": 3} for i in range(8)]
    plain = job(5, "replay", trace="\n".join(json.dumps(r) for r in rows))
    part = only(tradeoff([plain], recipe="r", to_policy="rule"), "replay")
    assert part["served"] is None and part["engines"] == []
    assert set(part["replayed"]) == set(selectable_policies())
    assert all(p["reproduction"] is None for p in part["replayed"].values())


def test_comparisons_made_beforehand_give_the_trade_off_the_per_request_rows_give():
    """A result read without its per-request rows, with `every_request_deltas` made from them,
    summarises as the whole result does, for either order of the pair."""
    from scheduler_core.analyses.simulate import ANALYSIS as SIMULATE
    from scheduler_core.comparison import every_request_deltas

    result = SIMULATE.run(SIMULATE.validate({"requests": 25, "seed": 2}), lambda event: None)
    lean = {**result, "policies": [{k: v for k, v in p.items() if k != "per_request"} for p in result["policies"]]}
    compared = tuple(every_request_deltas(result["policies"]))
    assert len(compared) == 2
    shown = []
    for pair in (Pair("cost", "rule"), Pair("rule", "cost")):
        whole = summarise([Evidence(1, "simulate", "r", {}, result)], subject=Subject("r"), pair=pair)
        read = summarise([Evidence(1, "simulate", "r", {}, lean, compared=compared)], subject=Subject("r"), pair=pair)
        assert read == whole
        shown.append(read["requests"][0])
    assert shown[0]["max"] == -shown[1]["min"]  # each order read as its own: after - before
    unread = summarise(
        [Evidence(1, "simulate", "r", {}, lean, compared=())], subject=Subject("r"), pair=Pair("cost", "rule")
    )
    assert unread["requests"] == []  # no comparison made for the pair: none shown, none invented
