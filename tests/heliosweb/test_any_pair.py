"""Any two policies on a job's page (issue 29, item 2): the pair the reader picks, by default
the first two the job ran, is what every delta on the simulate, capacity, replay and sweep pages, in
their CSV files and in the result's text compares; a third policy declared in a test shows up in all of them with no other
edit. A pair the job did not run is refused naming the field. Results stored before compare
rule - cost and are rewritten to the shape of any pair (migration jobs 0006)."""

from __future__ import annotations

import csv
import importlib
import io
import json

import pytest
from django.apps import apps

from heliosweb.jobs.models import BenchmarkJob
from scheduler_core.comparison import Pair, deltas_of
from scheduler_core.deltas import DIFFERENCE_OF_PERCENTILES, column
from scheduler_core.policies import POLICIES

from ..scheduler_core.test_evidence_bound import FirstGraphPolicy
from .runs import SMALL, store

THIRD = FirstGraphPolicy.name
RAN = ["cost", THIRD, "rule"]


@pytest.fixture
def third(monkeypatch):
    monkeypatch.setitem(POLICIES, THIRD, FirstGraphPolicy)
    return THIRD


@pytest.fixture
def client_in(client, viewer):
    client.force_login(viewer)
    return client


def table(client, job, name, pair):
    response = client.get(f"/api/jobs/{job.pk}/table.csv", {"table": name, **pair})
    assert response.status_code == 200, response.content
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def ttft_by_request(result, policy):
    return {r["id"]: r["ttft_ms"] for r in next(p for p in result["policies"] if p["policy"] == policy)["per_request"]}


@pytest.mark.parametrize("kind", ["simulate", "replay"])
def test_a_picked_pair_with_a_third_policy_is_what_the_page_and_its_exports_compare(client_in, third, kind):
    job = store(kind, raw={**SMALL[kind], "policies": RAN})
    default = client_in.get(f"/jobs/{job.pk}").content.decode()
    assert f'<strong id="pair-label">{third} − cost</strong>' in default  # the first two run
    picked = {"before": "rule", "after": third}
    page = client_in.get(f"/jobs/{job.pk}", picked).content.decode()
    assert f'<strong id="pair-label">{third} − rule</strong>' in page
    assert f"table=deltas&amp;before=rule&amp;after={third}" in page  # every CSV link carries the pair
    assert f'data-figures-url="/api/jobs/{job.pk}/figures/?before=rule&amp;after={third}"' in page
    figures = {f["id"]: f for f in client_in.get(f"/api/jobs/{job.pk}/figures/", picked).json()}
    assert figures["deltas"]["title"] == f"{third} − rule per request"
    # computed here from the stored per-request rows: after - before for the same request
    after, before = ttft_by_request(job.result, third), ttft_by_request(job.result, "rule")
    mine = sorted(after[i] - before[i] for i in after)
    cdf = figures["deltas"]["figure"]["data"][0]["x"]
    assert cdf[0] == pytest.approx(mine[0], abs=1e-5) and cdf[-1] == pytest.approx(mine[-1], abs=1e-5)
    rows = table(client_in, job, "deltas", picked)
    assert {(r["before"], r["after"]) for r in rows} == {("rule", third)}
    of_percentiles = next(r for r in rows if r["delta"] == column(DIFFERENCE_OF_PERCENTILES))
    own = job.result["policies"]
    p50 = {p["policy"]: p["ttft_ms"]["p50"] for p in own}
    assert float(of_percentiles["p50"]) == pytest.approx(p50[third] - p50["rule"], abs=1e-5)
    worst = table(client_in, job, "worst", picked)
    assert worst and all(
        float(w["delta_ms"]) == pytest.approx(after[int(w["id"])] - before[int(w["id"])], abs=1e-5) for w in worst
    )


def test_a_capacity_page_compares_the_picked_pair_at_every_rate(client_in, third):
    job = store("capacity", raw={**SMALL["capacity"], "policies": RAN})
    picked = {"before": third, "after": "cost"}
    figures = {f["id"]: f for f in client_in.get(f"/api/jobs/{job.pk}/figures/", picked).json()}
    assert figures["deltas"]["title"] == f"cost − {third} per request"
    points = {p["policy"]: p["points"] for p in job.result["policies"]}
    rows = table(client_in, job, "deltas", picked)
    assert len(rows) == len(job.result["rates_per_s"]) and {(r["before"], r["after"]) for r in rows} == {
        (third, "cost")
    }
    for i, row in enumerate(rows):  # the difference of the two policies' mean p50 over the same seeds
        expected = points["cost"][i]["ttft_p50_ms"]["mean"] - points[third][i]["ttft_p50_ms"]["mean"]
        assert float(row[f"{column(DIFFERENCE_OF_PERCENTILES)}_p50_ms"]) == pytest.approx(expected, abs=1e-4)
    worst = table(client_in, job, "worst", picked)
    assert worst and all(
        float(w["delta_ms"]) == pytest.approx(float(w["after_ttft_ms"]) - float(w["before_ttft_ms"]), abs=1e-5)
        for w in worst
    )


def test_a_sweep_page_its_summary_csv_and_its_text_compare_the_picked_pair(client_in, third):
    job = store("sweep", raw={**SMALL["sweep"], "policies": RAN})
    assert f'<strong id="pair-label">{third} − cost</strong>' in client_in.get(f"/jobs/{job.pk}").content.decode()
    picked = {"before": "rule", "after": third}
    page = client_in.get(f"/jobs/{job.pk}", picked).content.decode()
    assert f'<strong id="pair-label">{third} − rule</strong>' in page
    assert f"table=summary&amp;before=rule&amp;after={third}" in page
    figure = next(f for f in client_in.get(f"/api/jobs/{job.pk}/figures/", picked).json() if f["id"] == "ttft")
    assert figure["title"] == f"TTFT and {third} − rule"
    for catalog, by_policy in job.result["series"].items():  # after - before per prompt length, made here
        mine = [a - b for a, b in zip(by_policy[third]["ttft_ms"], by_policy["rule"]["ttft_ms"])]
        drawn = next(t for t in figure["figure"]["data"] if t["name"] == f"{catalog}: {third} − rule")
        assert drawn["y"] == pytest.approx(mine, abs=1e-5)
        row = next(r for r in table(client_in, job, "summary", picked) if r["catalog"] == catalog)
        assert (row["before"], row["after"]) == ("rule", third)
        assert int(row["after_wins"]) == sum(d < -1e-6 for d in mine)
        assert int(row["after_loses"]) == sum(d > 1e-6 for d in mine)
    text = client_in.get(f"/api/jobs/{job.pk}/", picked).json()["summary"]
    assert f"delta = {third} − rule TTFT" in text
    assert client_in.get(f"/api/jobs/{job.pk}/").json()["summary"] != text  # the default pair's differs


@pytest.mark.parametrize("kind", ["simulate", "replay"])
def test_the_result_text_names_both_deltas_of_the_picked_pair(client_in, third, kind):
    job = store(kind, raw={**SMALL[kind], "policies": RAN})
    text = client_in.get(f"/api/jobs/{job.pk}/", {"before": "rule", "after": third}).json()["summary"]
    after, before = ttft_by_request(job.result, third), ttft_by_request(job.result, "rule")
    p50 = {p["policy"]: p["ttft_ms"]["p50"] for p in job.result["policies"]}
    biggest = max(after[i] - before[i] for i in after)
    assert f"{third} − rule, percentile of per-request differences: p50" in text
    assert f"max {biggest:+.2f} ms" in text
    assert f"{third} − rule, difference of percentiles: p50 {p50[third] - p50['rule']:+.2f}" in text
    answer = client_in.get(f"/api/jobs/{job.pk}/", {"before": "rule", "after": "nope"})
    assert answer.status_code == 400 and answer.json()["field"] == "after"


def test_a_pair_the_job_did_not_run_is_refused_naming_the_field(client_in):
    job = store("simulate")
    for query, field in (
        ({"before": "cost", "after": "nope"}, "after"),
        ({"before": "rule", "after": "rule"}, "after"),
    ):
        answer = client_in.get(f"/api/jobs/{job.pk}/figures/", query)
        assert answer.status_code == 400 and answer.json()["field"] == field, answer.content
        assert client_in.get(f"/api/jobs/{job.pk}/table.csv", {"table": "deltas", **query}).status_code == 400
        page = client_in.get(f"/jobs/{job.pk}", query)
        assert page.status_code == 400 and f'data-field="{field}"' in page.content.decode()
    alone = store("simulate", raw={**SMALL["simulate"], "policies": ["cost"]})  # nothing to compare, no picker
    page = client_in.get(f"/jobs/{alone.pk}", {"before": "rule", "after": "cost"}).content.decode()
    assert 'id="pair-form"' not in page and 'id="error-pair" data-field="before"' in page


def test_results_stored_as_rule_minus_cost_are_rewritten_to_any_pair_and_back(client_in):
    simulated, capacity = store("simulate"), store("capacity")
    new = {job.pk: json.loads(json.dumps(job.result)) for job in (simulated, capacity)}
    old_simulate = json.loads(json.dumps(simulated.result))
    d = old_simulate["deltas"]
    for key in ("before", "after", "label"):
        del d[key]
    d["share_rule_slower"], d["share_rule_faster"] = d.pop("share_after_slower"), d.pop("share_after_faster")
    d["worst"] = [
        {
            **{k: v for k, v in w.items() if not k.endswith("_ttft_ms")},
            "cost_ttft_ms": w["before_ttft_ms"],
            "rule_ttft_ms": w["after_ttft_ms"],
        }
        for w in d["worst"]
    ]
    old_capacity = json.loads(json.dumps(capacity.result))
    for row in old_capacity["deltas"]:  # the rule - cost comparison alone, at the row's top
        c = deltas_of(row.pop("comparisons"), Pair("cost", "rule"))
        row.update({k: v for k, v in c.items() if k not in ("before", "after", "label", "per_request")})
        per = c["per_request"]
        per = {k: v for k, v in per.items() if k not in ("before", "after", "label")}
        per["share_rule_slower"], per["share_rule_faster"] = (
            per.pop("share_after_slower"),
            per.pop("share_after_faster"),
        )
        per["worst"] = [
            {
                **{k: v for k, v in w.items() if not k.endswith("_ttft_ms")},
                "cost_ttft_ms": w["before_ttft_ms"],
                "rule_ttft_ms": w["after_ttft_ms"],
            }
            for w in per["worst"]
        ]
        row["per_request"] = per
    BenchmarkJob.objects.filter(pk=simulated.pk).update(result=old_simulate)
    BenchmarkJob.objects.filter(pk=capacity.pk).update(result=old_capacity)
    migration = importlib.import_module("heliosweb.jobs.migrations.0007_deltas_of_any_pair")
    migration._rewrite(apps, None, True)
    simulated.refresh_from_db()
    capacity.refresh_from_db()
    assert simulated.result == new[simulated.pk]
    for row, stored in zip(capacity.result["deltas"], new[capacity.pk]["deltas"]):  # only rule - cost was stored
        assert row["comparisons"] == [deltas_of(stored["comparisons"], Pair("cost", "rule"))]
    migration._rewrite(apps, None, False)
    simulated.refresh_from_db()
    capacity.refresh_from_db()
    assert simulated.result == old_simulate and capacity.result == old_capacity
    migration._rewrite(apps, None, True)
    for job in (simulated, capacity):
        assert client_in.get(f"/api/jobs/{job.pk}/figures/").status_code == 200
        assert client_in.get(f"/api/jobs/{job.pk}/table.csv", {"table": "deltas"}).status_code == 200


def test_sweeps_stored_without_their_policies_take_them_in_run_order_from_their_params(client_in, third):
    job = store("sweep", raw={**SMALL["sweep"], "policies": RAN})
    old = {k: v for k, v in job.result.items() if k != "policies"}
    BenchmarkJob.objects.filter(pk=job.pk).update(result=old)
    migration = importlib.import_module("heliosweb.jobs.migrations.0008_sweep_policies")
    migration._rewrite(apps, None, True)
    job.refresh_from_db()
    assert job.result["policies"] == RAN
    assert f'<strong id="pair-label">{third} − cost</strong>' in client_in.get(f"/jobs/{job.pk}").content.decode()
    migration._rewrite(apps, None, False)
    job.refresh_from_db()
    assert "policies" not in job.result
