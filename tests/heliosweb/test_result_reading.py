"""A done job's reading (`jobs.result_reading`): made by the worker as it stores the result, read
by the decision pages instead of the result, and giving them what the whole result gives."""

from __future__ import annotations

import datetime as dt
import html

from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext

from heliosweb.decisions.tradeoff import decision_tradeoff
from heliosweb.decisions.tradeoff_cache import decision_tradeoff_kept
from heliosweb.jobs.models import BenchmarkJob, ResultReading
from heliosweb.jobs.result_reading import job_version, reading_store, readings
from heliosweb.jobs.selectors import job_summary
from scheduler_core.comparison import Pair
from scheduler_core.evidence import Evidence, Subject
from scheduler_core.tradeoff import tradeoff

from .test_decisions import propose
from .test_tradeoff_cache import reads_results, simulate_job


def whole_tradeoff(decision, jobs: list[BenchmarkJob]) -> dict:
    """The trade-off's figures from the jobs' whole results, computed here without any reading."""
    evidence = [Evidence(j.pk, j.kind, j.recipe.name, j.params, j.result) for j in jobs]
    return tradeoff(
        evidence,
        subject=Subject(decision.recipe.name, decision.recipe.hardware),
        pair=Pair(decision.from_policy, decision.to_policy),
    )


def test_the_reading_drops_the_per_request_rows_and_keeps_every_pairs_comparison(recipe):
    job = simulate_job(recipe, requests=30)
    reading = reading_store(job, job.result)
    assert all("per_request" not in p for p in reading.lean["policies"])
    assert all("per_request" in p for p in job.result["policies"])
    assert {(c["before"], c["after"]) for c in reading.compared} == {("cost", "rule"), ("rule", "cost")}
    rows = {p["policy"]: {r["id"]: r["ttft_ms"] for r in p["per_request"]} for p in job.result["policies"]}
    rule_minus_cost = sorted(rows["rule"][i] - rows["cost"][i] for i in rows["cost"])
    compared = next(c for c in reading.compared if c["after"] == "rule")
    assert compared["requests"] == 30 and compared["max"] == round(rule_minus_cost[-1], 6)
    assert reading.text == job_summary(job) and reading.text


def test_the_trade_off_from_readings_is_the_one_from_whole_results(author, recipe):
    jobs = [simulate_job(recipe, requests=30), simulate_job(recipe, seed=4, requests=30)]
    decision = propose(author, evidence=[j.pk for j in jobs])
    from_readings = decision_tradeoff(decision=decision)
    whole = whole_tradeoff(decision, jobs)
    for part in ("simulate", "requests", "checklist"):
        assert [_without_links(p) for p in from_readings[part]] == whole[part], part
    assert len(from_readings["requests"]) == 2, "no per-request comparison: the check would compare nothing"


def _without_links(part: dict) -> dict:
    """A part less what only the web adds (explain links, a stored trace's name)."""
    if "worst" in part:
        part = {**part, "worst": [{k: v for k, v in w.items() if k != "explain_url"} for w in part["worst"]]}
    return {k: v for k, v in part.items() if k not in ("stored_trace", "telemetry")}


def test_a_decisions_first_view_reads_the_readings_not_the_results(client, author, recipe):
    jobs = [simulate_job(recipe), simulate_job(recipe, seed=3)]
    for job in jobs:  # as the worker leaves them
        reading_store(job, job.result)
    decision = propose(author, evidence=[j.pk for j in jobs])
    client.force_login(author)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/decisions/{decision.pk}")
    assert page.status_code == 200 and not reads_results(queries)
    assert page.content.count(b"job #") >= 2


def test_a_job_without_a_reading_or_changed_since_gets_one_made_once(author, recipe):
    job = simulate_job(recipe)
    assert not ResultReading.objects.filter(job=job).exists()
    made = readings([BenchmarkJob.objects.defer("result").get(pk=job.pk)])[job.pk]
    assert made.version == job_version(job) and ResultReading.objects.filter(job=job).count() == 1
    BenchmarkJob.objects.filter(pk=job.pk).update(
        result=simulate_job(recipe, seed=5).result, finished_at=job.finished_at + dt.timedelta(1)
    )
    job.refresh_from_db()
    remade = readings([job])[job.pk]
    assert remade.version == job_version(job) != made.version
    assert remade.compared != made.compared and ResultReading.objects.filter(job=job).count() == 1
    decision = propose(author, evidence=[job.pk])
    assert decision_tradeoff_kept(decision=decision)["requests"][0]["cdf_ms"] == remade.compared[0]["cdf_ms"]


def test_the_worker_stores_a_done_jobs_reading_with_its_result(maintainer, transactional_db):
    from heliosweb.jobs.services.runner import job_run
    from heliosweb.jobs.services.submission import job_create

    job = job_create(kind="simulate", user=maintainer, params={"requests": 20})
    job_run(job_id=job.pk)
    job.refresh_from_db()
    reading = ResultReading.objects.get(job=job)
    assert job.status == "done" and reading.version == job_version(job)
    assert reading.compared and reading.text == job_summary(job)


def test_compare_shows_each_jobs_text_and_result_head_from_its_reading_not_its_result(client, maintainer, recipe):
    jobs = [simulate_job(recipe), simulate_job(recipe, seed=3)]
    for job in jobs:
        reading_store(job, job.result)
    for alias in caches:  # figures are built once the page asks: those read the results
        caches[alias].clear()
    client.force_login(maintainer)
    client.get(f"/compare?ids={jobs[0].pk},{jobs[1].pk}")  # the figures built (and kept)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/compare?ids={jobs[0].pk},{jobs[1].pk}")
    assert page.status_code == 200 and not reads_results(queries)
    text = page.content.decode()
    for job in jobs:
        reading = ResultReading.objects.get(job=job)
        assert html.escape(reading.head[:200]) in text and html.escape(reading.text.splitlines()[0]) in text
