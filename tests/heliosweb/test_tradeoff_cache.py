"""A decision's trade-off and its evidence's text are computed once per evidence set: a second view
reads no stored result, and any change to what they are computed from (the cited jobs, a job run
again, the recipe's boots, the decision's policies) shows at once."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from heliosweb.catalogs.models import Boot
from heliosweb.decisions.tradeoff import decision_tradeoff
from heliosweb.decisions.tradeoff_cache import decision_tradeoff_kept, tradeoff_key
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.jobs.registry import get_kind

from .test_decisions import propose

RESULT_COLUMN = '"jobs_benchmarkjob"."result"'


def simulate_job(recipe: Any, *, seed: int = 0, requests: int = 40) -> BenchmarkJob:
    analysis = get_kind("simulate").analysis
    params = analysis.validate({"requests": requests, "seed": seed})
    result = analysis.run(params, lambda event: None)
    return BenchmarkJob.objects.create(
        kind="simulate", queue="sim", recipe=recipe, params=analysis.to_json(params), status="done", result=result,
        finished_at=timezone.now(),
    )  # fmt: skip


def fresh(decision: Any) -> dict[str, Any]:
    return decision_tradeoff(decision=decision)


def reads_results(queries: CaptureQueriesContext) -> bool:
    assert queries.captured_queries, "no query captured: the check would see nothing"
    return any(RESULT_COLUMN in q["sql"] for q in queries.captured_queries)


def test_the_trade_off_is_computed_once_then_read_without_the_stored_results(author, recipe):
    decision = propose(author, evidence=[simulate_job(recipe).pk])
    first = decision_tradeoff_kept(decision=decision)
    assert first == fresh(decision)
    with CaptureQueriesContext(connection) as queries:
        again = decision_tradeoff_kept(decision=decision)
    assert again == first and not reads_results(queries)


def test_citing_another_job_shows_at_once(author, recipe):
    decision = propose(author, evidence=[simulate_job(recipe).pk])
    before = decision_tradeoff_kept(decision=decision)
    decision.evidence.add(simulate_job(recipe, seed=7))
    after = decision_tradeoff_kept(decision=decision)
    assert after == fresh(decision) and after != before


def test_a_job_run_again_with_a_new_result_shows_at_once(author, recipe):
    job = simulate_job(recipe)
    decision = propose(author, evidence=[job.pk])
    before = decision_tradeoff_kept(decision=decision)
    other = simulate_job(recipe, seed=9)
    BenchmarkJob.objects.filter(pk=job.pk).update(result=other.result, finished_at=job.finished_at + dt.timedelta(1))
    after = decision_tradeoff_kept(decision=decision)
    assert after == fresh(decision) and after != before


def test_the_key_follows_the_recipes_boots_and_the_decisions_policies(author, recipe):
    decision = propose(author, evidence=[simulate_job(recipe).pk])
    key = tradeoff_key(decision)
    assert tradeoff_key(decision) == key
    Boot.objects.create(recipe=recipe, catalog=[{"prefill": 64, "decode": 0, "ms": 1.0}])
    with_boot = tradeoff_key(decision)
    assert with_boot != key
    decision.to_policy = "cost"
    assert tradeoff_key(decision) != with_boot


def test_the_decision_page_viewed_again_reads_no_stored_result(client, author, recipe):
    decision = propose(author, evidence=[simulate_job(recipe).pk, simulate_job(recipe, seed=3).pk])
    client.force_login(author)
    first = client.get(f"/decisions/{decision.pk}")
    assert first.status_code == 200
    with CaptureQueriesContext(connection) as queries:
        again = client.get(f"/decisions/{decision.pk}")
    assert again.status_code == 200 and not reads_results(queries)
    assert again.content.count(b"job #") == first.content.count(b"job #") >= 2


def test_a_cited_jobs_recipe_renamed_shows_on_the_next_view(client, author, recipe):
    from heliosweb.recipes.models import Recipe
    from heliosweb.recipes.services import recipe_create

    other = recipe_create(name="other-grid", policy="cost")
    decision = propose(author, evidence=[simulate_job(other).pk])
    client.force_login(author)
    assert b"other-grid" in client.get(f"/decisions/{decision.pk}").content
    Recipe.objects.filter(pk=other.pk).update(name="renamed-grid")
    again = client.get(f"/decisions/{decision.pk}").content
    assert b"renamed-grid" in again and b"other-grid" not in again


def test_the_proposer_renamed_shows_on_the_next_view(client, author, recipe):
    decision = propose(author, evidence=[simulate_job(recipe).pk])
    client.force_login(author)
    assert b"cited by alice" in client.get(f"/decisions/{decision.pk}").content
    type(author).objects.filter(pk=author.pk).update(username="alice-renamed")
    assert b"cited by alice-renamed" in client.get(f"/decisions/{decision.pk}").content
