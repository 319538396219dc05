"""Evidence bound to the decision (issue 29, items 1 and 2): each part names its source and its
hardware, a part from other hardware is marked and never read as the recipe's, and any two
policies, a third declared here included, are compared by every delta."""

from typing import ClassVar

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.comparison import Pair, default_pair
from scheduler_core.evidence import Evidence, Subject, same_hardware
from scheduler_core.policies import POLICIES, CostPolicy, Launch, PrefillState, rule_graph
from scheduler_core.request import Request
from scheduler_core.scheduler import Arrival, SchedulerConfig, schedule
from scheduler_core.tradeoff import tradeoff
from scheduler_core.verdict import verdict

from .test_scheduler import CLEAN, EXECUTION, with_shapes

RATES = {"rate_min_per_s": 0.5, "rate_max_per_s": 4.0, "steps": 3}


def job(job_id, kind, recipe="llama-a100", **params):
    analysis = ANALYSES[kind]
    clean = analysis.validate(params)
    return Evidence(job_id, kind, recipe, analysis.to_json(clean), analysis.run(clean, lambda e: None))


A100_RECIPE = Subject("llama-a100", "A100")
COST_RULE = Pair("cost", "rule")


def summary_of(evidence, pair=COST_RULE, subject=A100_RECIPE):
    out = tradeoff(evidence, subject=subject, pair=pair)
    out["verdict"] = verdict(out)
    return out


@pytest.fixture(scope="module")
def mixed_hardware():
    """An A100 recipe's decision citing an H100 capacity and simulate job first, then the A100 ones."""
    return [
        job(1, "capacity", execution="llama-2-7b-h100", requests=40, **RATES),
        job(2, "simulate", execution="llama-2-7b-h100", requests=40, rate_per_s=2.0),
        job(3, "capacity", execution="llama-2-7b-a100", requests=40, **RATES),
        job(4, "simulate", execution="llama-2-7b-a100", requests=40, rate_per_s=2.0),
    ]


def test_each_part_names_its_hardware_and_the_h100_ones_are_marked_not_this_recipes(mixed_hardware):
    summary = summary_of(mixed_hardware)
    for kind, (own, other) in {"capacity": (3, 1), "simulate": (4, 2), "requests": (None, None)}.items():
        parts = summary[kind]
        if own is None:  # one per serving job: both hardwares shown
            assert [p["source"]["hardware"] for p in parts] == ["A100", "A100", "H100", "H100"]
            continue
        assert [(p["job"], p["source"]["hardware"], p["source"]["own"]) for p in parts] == [
            (own, "A100", True),
            (other, "H100", False),
        ]  # the decision's own first, whatever the citing order; both shown
        assert parts[1]["source"]["foreign"] == [f"job #{other} ran on H100, not this recipe's A100"]
        assert parts[0]["source"]["execution"] == "GPU profile llama-2-7b-a100"


def test_the_verdict_reads_the_a100_jobs_and_never_the_h100_figures(mixed_hardware):
    summary = summary_of(mixed_hardware)
    v = summary["verdict"]
    a100_capacity = {p["policy"]: p["capacity_per_s"] for p in mixed_hardware[2].result["policies"]}
    assert [(c["job"], c["before"], c["after"]) for c in v["capacity"]] == [
        (3, a100_capacity["cost"], a100_capacity["rule"])
    ]
    assert {d["job"] for d in v["delta"]} == {3, 4} and {p["job"] for p in v["padding"]} == {3, 4}
    h100 = [line for line in v["cannot_vouch"] if "H100" in line]
    assert len(h100) == 2 and all("not read as this recipe's" in line for line in h100)
    # with only H100 evidence, nothing is read as the recipe's capacity: it says so instead
    only_h100 = summary_of(mixed_hardware[:2])["verdict"]
    assert only_h100["capacity"] == [] and only_h100["delta"] == []
    assert any("No capacity job of this recipe and hardware" in line for line in only_h100["cannot_vouch"])


def test_the_verdict_names_each_overloaded_run_with_its_sustained_rate_and_reads_its_delta_as_queueing():
    """At 40 requests/s the A100 keeps up with neither policy; at 1/s it does (issue 29, item 3)."""
    over = job(5, "simulate", execution="llama-2-7b-a100", requests=200, rate_per_s=40.0)
    under = job(6, "simulate", execution="llama-2-7b-a100", requests=200, rate_per_s=1.0)
    v = summary_of([over, under])["verdict"]
    named = [line for line in v["cannot_vouch"] if "overloaded" in line]
    assert len(named) == 2 and all(line.startswith("job #5 (simulate) was overloaded") for line in named)
    for p in over.result["policies"]:
        sustained = p["load"]["sustained_per_s"]
        assert sustained < 40.0
        assert any(
            line.startswith(f"job #5 (simulate) was overloaded, {p['policy']}: OVERLOADED")
            and f"sustained {sustained:g}/s" in line
            and "is queueing, not the policy's effect" in line
            for line in named
        )
    assert {d["job"]: d["queueing"] for d in v["delta"]} == {5: True, 6: False}


def test_another_recipe_and_an_undeclared_hardware_are_said():
    sim = job(5, "simulate", recipe="other", requests=20)
    summary = summary_of([sim], subject=Subject("llama-a100", ""))
    part = summary["simulate"][0]
    assert part["source"]["foreign"] == ["job #5 ran for recipe other, not llama-a100"]
    assert part["source"]["hardware"] is None  # the affine model: no GPU's timings
    assert summary["verdict"]["cannot_vouch"][0].startswith("Recipe llama-a100 declares no hardware")


def test_hardware_names_match_ignoring_case_and_vendor_words():
    assert same_hardware("A100", "NVIDIA A100-SXM4-80GB") is True
    assert same_hardware("a100", "H100") is False
    assert same_hardware("", "H100") is None and same_hardware("A100", None) is None


class FirstGraphPolicy:
    """A third policy, declared once here: always the smallest graph that covers what remains, else
    the largest. Its solo chunks never ride a mixed shape."""

    name: ClassVar[str] = "smallest"
    selectable: ClassVar[bool] = True

    def choose(self, state: PrefillState) -> Launch | None:
        catalog, request, p = state.catalog, state.request, state.position
        e = request.segment_end(p)
        graph = rule_graph(catalog, e - p)
        work = request.consumed(p, graph, e)
        if work == 0 or catalog.prefill_ms[graph] is None:
            return CostPolicy().choose(state)
        return Launch(graph, p, p + work, self.name, catalog.predicted_ms(graph))

    def may_ride_mixed(self, chunk: Launch, state: PrefillState) -> bool:
        return False


@pytest.fixture
def third(monkeypatch):
    monkeypatch.setitem(POLICIES, FirstGraphPolicy.name, FirstGraphPolicy)
    return FirstGraphPolicy.name


def test_the_step_loop_asks_the_policy_whether_its_solo_chunk_may_mix(third):
    catalog = with_shapes(CLEAN, (4096, 8, EXECUTION.launch_ms(4096, 8)))
    arrivals = [Arrival(0, 0.0, Request(10), 50), Arrival(1, 20.0, Request(8192), 1)]
    kinds = {}
    for name in ("rule", third):
        result = schedule(arrivals, catalog, EXECUTION, SchedulerConfig(name, trace_limit=10**6))
        kinds[name] = [s.kind for s in result.trace if s.lane == 1 and s.chunk is not None]
    assert kinds["rule"] == ["mixed", "mixed"]  # the rule's own graph may mix
    assert kinds[third] == ["prefill", "prefill"]  # the third policy declared that it never mixes


def test_a_third_policy_appears_in_every_delta_of_the_trade_off(third):
    pair = Pair("cost", third)
    policies = ["cost", third, "rule"]
    evidence = [
        job(1, "sweep", count=8, policies=policies),
        job(2, "simulate", execution="llama-2-7b-a100", requests=40, rate_per_s=2.0, policies=policies),
        job(3, "capacity", execution="llama-2-7b-a100", requests=40, repeats=2, policies=policies, **RATES),
    ]
    summary = summary_of(evidence, pair=pair)
    assert summary["pair"] == {"before": "cost", "after": third, "label": f"{third} − cost"}
    # sweep: after - before per prompt, from the two policies' own series
    series = evidence[0].result["series"]["clean"]
    delta = [round(a - b, 6) for a, b in zip(series[third]["ttft_ms"], series["cost"]["ttft_ms"])]
    sweep = summary["sweep"][0]["catalogs"]["clean"]
    assert sweep["mean_delta_ms"] == pytest.approx(sum(delta) / len(delta))
    assert sweep["after_loses"] == sum(d > 1e-6 for d in delta)
    # simulate: the difference of percentiles, third - cost
    by_name = {p["policy"]: p for p in evidence[1].result["policies"]}
    sim = summary["simulate"][0]
    assert list(sim["policies"])[:2] == ["cost", third]
    for q in ("p50", "p99"):
        assert sim["delta"][q] == pytest.approx(by_name[third]["ttft_ms"][q] - by_name["cost"]["ttft_ms"][q])
    # per request: third - cost for the same request id, the worst first
    cost_ttft = {r["id"]: r["ttft_ms"] for r in by_name["cost"]["per_request"]}
    mine = {r["id"]: r["ttft_ms"] - cost_ttft[r["id"]] for r in by_name[third]["per_request"]}
    requests = next(r for r in summary["requests"] if r["job"] == 2)
    assert requests["worst"][0]["delta_ms"] == pytest.approx(max(mine.values()))
    assert requests["worst"][0]["before_ttft_ms"] == cost_ttft[requests["worst"][0]["id"]]
    # capacity: third - cost at every rate, paired by seed over the draws
    cap = summary["capacity"][0]
    points = {p["policy"]: p["points"] for p in evidence[2].result["policies"]}
    assert list(cap["policies"])[:2] == ["cost", third] and len(cap["deltas"]) == 3
    for i, d in enumerate(cap["deltas"]):
        draws = [
            a - b for a, b in zip(points[third][i]["draws"]["ttft_p50_ms"], points["cost"][i]["draws"]["ttft_p50_ms"])
        ]
        assert d["p50"]["mean"] == pytest.approx(sum(draws) / len(draws)) and d["p50"]["n"] == 2
    assert {d["job"] for d in summary["verdict"]["delta"]} == {2, 3}


def test_the_default_pair_is_the_first_two_policies_run():
    assert default_pair(["rule", "cost", "rule-v1"]) == Pair("rule", "cost")
    assert default_pair(["cost"]) is None


def test_every_registered_policy_declares_whether_its_solo_chunk_may_mix():
    for name, cls in POLICIES.items():
        assert callable(getattr(cls(), "may_ride_mixed", None)), name
