"""Telemetry ingestion: every field validated and named, nothing stored from a bad batch, a retried
batch stored once, rollups per policy version, and pruning that keeps them."""

from __future__ import annotations

import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from heliosweb.recipes.services import policy_set
from heliosweb.telemetry import buckets
from heliosweb.telemetry.models import Rollup, TelemetryBatch, Totals
from heliosweb.telemetry.services import telemetry_prune

NOW_MS = time.time() * 1000


def launch(i: int = 0, **over):
    return {
        "type": "launch",
        "t_ms": NOW_MS,
        "request": i,
        "graph": 512,
        "start": 0,
        "end": 300,
        "padded": 212,
        "chooser": "rule",
        "ms": 5.5,
        "policy": "cost",
        "version": 1,
        **over,
    }


def finished(i: int = 0, **over):
    return {
        "type": "request",
        "t_ms": NOW_MS,
        "request": i,
        "prompt_tokens": 300,
        "ttft_ms": 12.0,
        "itl_ms": [2.0, 2.5],
        "launches": [512],
        "policy": "cost",
        "version": 1,
        **over,
    }


@pytest.fixture
def engine(recipe) -> Client:
    out = StringIO()
    call_command("create_api_token", engine="eng-1", recipes="tiny-cpu", stdout=out)
    return Client(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")


def post(client: Client, body):
    return client.post("/api/recipes/tiny-cpu/telemetry/", body, content_type="application/json")


def test_a_batch_is_stored_and_rolled_up_per_policy_version(engine, recipe):
    records = [launch(0), launch(1, graph=1024, end=1024, padded=0), finished(0), finished(1, ttft_ms=40.0)]
    response = post(engine, {"engine": "eng-1", "batch": 1, "records": records})
    assert response.status_code == 201
    assert response.json() == {"engine": "eng-1", "batch": 1, "stored": True, "launches": 2, "requests": 2}
    rollup = Rollup.objects.get()
    assert (rollup.version, rollup.policy, rollup.requests, rollup.prefill_launches) == (1, "cost", 2, 2)
    assert (rollup.launched_tokens, rollup.padded_tokens, rollup.request_launches) == (1536, 212, 2)
    assert sum(rollup.ttft_buckets) == 2 and sum(rollup.itl_buckets) == 4
    assert rollup.ttft_buckets[buckets.bucket_of(40.0)] == 1
    assert rollup.sequences == {"300": ["512"]}
    assert Totals.objects.get().requests == 2


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (launch(graph=0), "records[1].graph"),
        (launch(end=600), "records[1].end"),
        (launch(padded=3), "records[1].padded"),
        (launch(ms=-1.0), "records[1].ms"),
        (launch(version=2), "records[1].version"),
        (launch(policy="fastest"), "records[1].policy"),
        (launch(policy="rule"), "records[1].policy"),
        (launch(t_ms=NOW_MS * 1000), "records[1].t_ms"),
        ({**launch(), "colour": "red"}, "records[1].colour"),
        ({k: v for k, v in launch().items() if k != "chooser"}, "records[1].chooser"),
        (finished(itl_ms=[1.0, -2.0]), "records[1].itl_ms[1]"),
        (finished(launches=[]), "records[1].launches"),
        (finished(prompt_tokens="many"), "records[1].prompt_tokens"),
        ({"type": "decode"}, "records[1].type"),
        ("launch", "records[1]"),
    ],
)
def test_a_bad_record_is_named_and_nothing_is_stored(engine, record, field):
    response = post(engine, {"engine": "eng-1", "batch": 7, "records": [launch(), record]})
    assert response.status_code == 400 and response.json()["field"] == field, response.json()
    assert not TelemetryBatch.objects.exists() and not Rollup.objects.exists() and not Totals.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"engine": "eng-2", "batch": 1, "records": [launch()]}, "engine"),
        ({"engine": "eng-1", "batch": -1, "records": [launch()]}, "batch"),
        ({"engine": "eng-1", "batch": 1, "records": []}, "records"),
        ({"engine": "eng-1", "batch": 1, "records": [launch()] * 10_001}, "records"),
        ({"engine": "eng-1", "batch": 1, "boot": 99, "records": [launch()]}, "boot"),
        ({"engine": "eng-1", "batch": 1, "records": [launch()], "extra": 1}, "extra"),
        ([launch()], "body"),
    ],
)
def test_a_bad_batch_is_named_and_nothing_is_stored(engine, body, field):
    response = post(engine, body)
    assert response.status_code == 400 and response.json()["field"] == field, response.json()
    assert not TelemetryBatch.objects.exists()


def test_a_retried_batch_is_answered_200_and_stored_once(engine):
    body = {"engine": "eng-1", "batch": 3, "records": [launch(), finished()]}
    assert post(engine, body).status_code == 201
    again = post(engine, body)
    assert again.status_code == 200 and again.json()["stored"] is False
    assert (
        TelemetryBatch.objects.count() == 1
        and Rollup.objects.get().requests == 1
        and Totals.objects.get().requests == 1
    )


def test_a_version_the_recipe_has_had_is_accepted_with_its_policy(engine, recipe):
    policy_set(recipe=recipe, policy="rule")
    records = [launch(), finished(policy="rule", version=2)]
    assert post(engine, {"engine": "eng-1", "batch": 1, "records": records}).status_code == 201
    assert sorted(Rollup.objects.values_list("version", "policy")) == [(1, "cost"), (2, "rule")]


def test_pruning_drops_old_batches_and_keeps_rollups(engine, settings):
    assert post(engine, {"engine": "eng-1", "batch": 1, "records": [launch(), finished()]}).status_code == 201
    assert post(engine, {"engine": "eng-1", "batch": 2, "records": [launch()]}).status_code == 201
    TelemetryBatch.objects.filter(batch=1).update(received_at=timezone.now() - timedelta(hours=25))
    assert telemetry_prune() == {"batches": 1, "rollups": 0}
    assert list(TelemetryBatch.objects.values_list("batch", flat=True)) == [2]
    settings.HELIOS_TELEMETRY_MAX_RECORDS = 0
    assert telemetry_prune()["batches"] == 1 and not TelemetryBatch.objects.exists()
    rollup = Rollup.objects.get()
    assert (rollup.prefill_launches, rollup.requests) == (2, 1)
    assert (
        telemetry_prune(now=timezone.now() + timedelta(days=settings.HELIOS_TELEMETRY_ROLLUP_DAYS + 1))["rollups"] == 1
    )
    assert Totals.objects.get().prefill_launches == 2


def test_a_maintainer_may_post_and_a_reader_may_not(recipe, maintainer, django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user("reader", password="pw-reader-123"))
    assert post(client, {"engine": "e", "batch": 1, "records": [launch()]}).status_code == 403
    client.force_login(maintainer)
    assert post(client, {"engine": "e", "batch": 1, "records": [launch()]}).status_code == 201
