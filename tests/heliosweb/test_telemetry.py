"""Telemetry ingestion: every field validated and named, nothing stored from a bad batch, a retried
batch stored once, rollups per policy version, and pruning that keeps them."""

from __future__ import annotations

import importlib
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.apps import apps as django_apps
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from heliosweb.recipes.services import policy_set
from heliosweb.telemetry import buckets
from heliosweb.telemetry.models import LiveSequence, Rollup, TelemetryBatch, Totals
from heliosweb.telemetry.services import telemetry_prune
from heliosweb.telemetry.validation import parse_batch
from scheduler_core.errors import InvalidInput

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
    assert post(engine, {**body, "batch": 4}).status_code == 201
    assert list(TelemetryBatch.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2]  # no gap left


def test_a_batch_within_a_minute_costs_the_recipe_the_rollup_the_totals_the_frame_and_the_insert(engine):
    """An upper bound on the queries of the hot path (timing is the bench's job)."""
    post(engine, {"engine": "eng-1", "batch": 1, "records": [launch()]})  # the token checked, the rows created
    with CaptureQueriesContext(connection) as queries:
        assert post(engine, {"engine": "eng-1", "batch": 2, "records": [launch(1), finished(1)]}).status_code == 201
    assert len(queries) <= 9, [q["sql"][:80] for q in queries]


def test_frame_numbers_go_on_from_the_highest_stored_once_the_counter_is_seeded(engine):
    seed = importlib.import_module("heliosweb.telemetry.migrations.0004_live_sequence").seed
    for number in (1, 2):
        post(engine, {"engine": "eng-1", "batch": number, "records": [launch()]})
    LiveSequence.objects.all().delete()  # a database from before the counter
    seed(django_apps, None)
    assert post(engine, {"engine": "eng-1", "batch": 3, "records": [launch()]}).status_code == 201
    assert TelemetryBatch.objects.get(batch=3).seq == 3


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


def launches(n: int, bad_at: int, **bad) -> list[dict]:
    """`n` valid launch records, the one at `bad_at` with `bad` fields."""
    return [launch(i, **(bad if i == bad_at else {})) for i in range(n)]


@pytest.mark.parametrize(
    ("records", "field"),
    [
        (launches(30, 17, graph=True), "records[17].graph"),
        (launches(30, 17, start=0.0), "records[17].start"),
        (launches(30, 17, request=-1), "records[17].request"),
        (launches(30, 17, ms=float("nan")), "records[17].ms"),
        (launches(30, 17, t_ms=float("inf")), "records[17].t_ms"),
        (launches(30, 17, chooser="c" * 33), "records[17].chooser"),
        (launches(30, 17, policy=["cost"]), "records[17].policy"),
        (launches(30, 17, version=1, policy="rule"), "records[17].policy"),  # version 1 was "cost" from record 0
        ([*launches(3, 0), finished(0, type="decode")], "records[3].type"),
        ([finished(0), launch(1, policy="rule")], "records[1].policy"),  # the request came first
        ([launch(0), finished(1, ttft_ms=-1.0), launch(2, graph=True)], "records[1].ttft_ms"),
        ([launch(0), launch(1, padded=0), finished(2, ttft_ms=-1.0)], "records[1].padded"),
        ([launch(0), launch(1, extra=1), finished(2)], "records[1].extra"),
        (launches(30, 29, t_ms=NOW_MS + 10 * 60_000), "records[29].t_ms"),
    ],
)
def test_the_first_bad_field_is_named_whichever_record_type_holds_it(records, field):
    """Launch records are checked a field at a time across the batch: a failure is still named in
    batch order (this test calls the parser directly, so it can send NaN, which JSON cannot)."""
    with pytest.raises(InvalidInput) as refused:
        parse_batch(
            {"engine": "eng-1", "batch": 1, "records": records},
            current_version=2,
            current_policy="rule",
            now_ms=NOW_MS,
        )
    assert refused.value.field == field


def test_a_mixed_batch_over_two_minutes_and_versions_is_stored_and_rolls_up_to_independent_sums(engine, recipe):
    policy_set(recipe=recipe, policy="rule")
    minute = NOW_MS // 60_000 * 60_000
    records = []
    for i in range(40):
        version, t = (1, minute - 30_000 + i / 7) if i % 3 else (2, minute + i / 7)
        policy = "cost" if version == 1 else "rule"
        graph = (256, 512, 1024)[i % 3]
        if i % 4:
            records.append(launch(i, t_ms=t, graph=graph, end=200, padded=graph - 200, policy=policy, version=version))
        else:
            gaps = [0.5 * (i % 7), 3.0 + i]
            records.append(
                finished(
                    i,
                    t_ms=t,
                    ttft_ms=1.0 + i,
                    itl_ms=gaps,
                    launches=[graph, 64],
                    prompt_tokens=300,
                    policy=policy,
                    version=version,
                )
            )
    assert post(engine, {"engine": "eng-1", "batch": 1, "records": records}).status_code == 201
    assert TelemetryBatch.objects.get().records == records  # stored as posted
    for version in (1, 2):
        mine = [r for r in records if r["version"] == version]
        runs = [r for r in mine if r["type"] == "launch"]
        done = [r for r in mine if r["type"] == "request"]
        expected = {
            "policy": "cost" if version == 1 else "rule",
            "prefill_launches": len(runs),
            "launched_tokens": sum(r["graph"] for r in runs),
            "padded_tokens": sum(r["padded"] for r in runs),
            "requests": len(done),
            "request_launches": 2 * len(done),
            "ttft_sum_ms": sum(r["ttft_ms"] for r in done),
            "itl_sum_ms": sum(sum(r["itl_ms"]) for r in done),
        }
        ttft, itl = buckets.empty(), buckets.empty()
        for r in done:
            ttft[buckets.bucket_of(r["ttft_ms"])] += 1
            for gap in r["itl_ms"]:
                itl[buckets.bucket_of(gap)] += 1
        for row in (Rollup.objects.get(version=version), Totals.objects.get(version=version)):
            assert {k: getattr(row, k) for k in expected} == pytest.approx(expected)
            assert (row.ttft_buckets, row.itl_buckets) == (ttft, itl)
        rollup = Rollup.objects.get(version=version)
        assert rollup.minute.timestamp() * 1000 == (minute - 60_000 if version == 1 else minute)
        assert rollup.sequences == {"300": sorted({f"{r['launches'][0]},64" for r in done})}
