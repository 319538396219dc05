"""What a serving number is, and when not to believe it, on the pages and in the exports: an
overloaded run says so on its job page; both deltas are exported under their names; /explain reached
from a run's table splits that request's TTFT into parts that add up to the table's figure."""

from __future__ import annotations

import csv
import io
import json

import pytest

from heliosweb.decisions.tradeoff import explain_url
from scheduler_core.analyses import ANALYSES
from scheduler_core.deltas import DIFFERENCE_OF_PERCENTILES, PERCENTILE_OF_DIFFERENCES, column

from .runs import store

OVERLOADED = {"requests": 200, "rate_per_s": 40.0, "prompt_max": 8000, "launch_events": 0}
UNDERLOADED = {"requests": 200, "rate_per_s": 4.0, "prompt_max": 8000, "launch_events": 0}


@pytest.fixture
def client_in(client, viewer):
    client.force_login(viewer)
    return client


def table(client, job, name):
    response = client.get(f"/api/jobs/{job.pk}/table.csv", {"table": name})
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_an_overloaded_simulate_says_so_on_its_page_and_in_its_export(client_in):
    over, under = store("simulate", raw=OVERLOADED), store("simulate", raw=UNDERLOADED)
    html = client_in.get(f"/jobs/{over.pk}").content.decode()
    assert 'id="job-overloaded"' in html and "mostly queueing" in html
    for p in over.result["policies"]:
        assert f"{p['policy']}: OVERLOADED: offered {p['load']['offered_per_s']:g}/s, sustained" in html
    assert 'id="job-overloaded"' not in client_in.get(f"/jobs/{under.pk}").content.decode()
    rows = table(client_in, over, "policies")
    assert [r["load_overloaded"] for r in rows] == ["True"] * len(over.result["policies"])
    assert [r["load_overloaded"] for r in table(client_in, under, "policies")] == ["False"] * len(
        under.result["policies"]
    )


def test_both_deltas_are_exported_under_their_names(client_in):
    job = store("simulate", raw=UNDERLOADED)
    rows = {r["delta"]: r for r in table(client_in, job, "deltas")}
    d = job.result["deltas"]
    assert set(rows) == {column(PERCENTILE_OF_DIFFERENCES), column(DIFFERENCE_OF_PERCENTILES)}
    assert float(rows[column(PERCENTILE_OF_DIFFERENCES)]["p50"]) == pytest.approx(d["p50"])
    assert float(rows[column(DIFFERENCE_OF_PERCENTILES)]["p50"]) == pytest.approx(d["difference_of_percentiles"]["p50"])
    capacity = store("capacity")
    [first, *_] = table(client_in, capacity, "deltas")
    assert (
        f"{column(DIFFERENCE_OF_PERCENTILES)}_p50_ms" in first
        and f"{column(PERCENTILE_OF_DIFFERENCES)}_p50_ms" in first
    )


def test_explain_from_a_serving_run_adds_the_plan_its_own_launches_and_its_wait_up_to_the_tables_figure(client_in):
    job = store("simulate", raw=OVERLOADED)
    worst = job.result["deltas"]["worst"][0]  # the row the decision page's table links from
    url = explain_url(job=job.pk, catalog="clean", prompt_tokens=worst["prompt_tokens"], request=worst["id"])
    response = client_in.get(url)
    assert response.status_code == 200
    in_run = response.context["in_run"]
    plans = {p["policy"]: p["ttft_ms"] for p in response.context["plans"]}
    table_figure = {"cost": worst["before_ttft_ms"], "rule": worst["after_ttft_ms"]}
    alone = _alone(job.params, worst)
    for split in (s for s in in_run["splits"] if s["policy"] in table_figure):  # the row's two policies
        policy = split["policy"]
        assert split["plan_ms"] == pytest.approx(plans[policy], abs=1e-5)  # the plan the page draws
        assert split["plan_ms"] + split["own_launches_ms"] == pytest.approx(alone[policy], abs=1e-5)
        total = split["plan_ms"] + split["own_launches_ms"] + split["waited_ms"]
        assert total == pytest.approx(table_figure[policy], abs=1e-5) == split["in_run_ms"]
        assert split["waited_ms"] > 0  # an overloaded run: it queued
    delta = in_run["delta"]
    assert (delta["after"], delta["before"]) == ("rule", "cost")
    parts = delta["plan_ms"] + delta["own_launches_ms"] + delta["waited_ms"]
    assert parts == pytest.approx(worst["delta_ms"], abs=1e-5) == delta["in_run_ms"]
    html = response.content.decode()
    assert 'id="in-run-parts"' in html and 'id="in-run-overloaded"' in html


def test_explain_from_a_capacity_rate_finds_the_request_at_that_rate_and_refuses_one_it_lacks(client_in):
    job = store("capacity")
    row = next(r for r in job.result["deltas"] if r["comparisons"] and r["comparisons"][0].get("per_request"))
    worst = row["comparisons"][0]["per_request"]["worst"][0]
    query = {"job": job.pk, "catalog": "clean", "prompt_tokens": worst["prompt_tokens"], "request": worst["id"]}
    split = client_in.get("/explain", {**query, "rate": row["rate_per_s"]}).context["in_run"]["delta"]
    assert split["in_run_ms"] == pytest.approx(worst["delta_ms"], abs=1e-5)
    response = client_in.get("/explain", {**query, "request": 10_000, "rate": row["rate_per_s"]})
    assert response.status_code == 400 and "holds no request 10000" in response.context["errors"]["request"]
    other = client_in.get("/explain", {**query, "prompt_tokens": worst["prompt_tokens"] + 1, "rate": row["rate_per_s"]})
    assert other.context["in_run"]["prompt_differs"] and "explain that prompt" in other.content.decode()


def _alone(params, worst):
    """The request with nothing else in the engine: simulate on a one-request trace, the job's setting."""
    simulate = ANALYSES["simulate"]
    one = json.dumps(
        {"arrival_ms": 0, "prompt_tokens": worst["prompt_tokens"], "output_tokens": worst["output_tokens"]}
    )
    setting = {
        k: params[k] for k in ("catalog", "execution", "fixed_ms", "ms_per_token", "first_token_ms", "max_lanes")
    }
    result = simulate.run(simulate.validate({**setting, "trace": one, "launch_events": 0}), lambda e: None)
    return {p["policy"]: p["per_request"][0]["ttft_ms"] for p in result["policies"]}


def test_the_live_before_after_panel_says_it_compares_different_traffic_and_points_to_the_replay(client_in, recipe):
    """The words are on the page (shown by its script once there is a change: the browser test sees them)."""
    html = client_in.get(f"/recipes/{recipe.name}/live").content.decode()
    caveat = html[html.index('id="panel-traffic"') : html.index('id="panel-body"')]
    assert "different traffic" in caveat and 'href="#replay"' in caveat and 'id="replay"' in html
