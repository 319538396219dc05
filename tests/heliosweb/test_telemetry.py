"""Telemetry ingestion: every field validated and named, nothing stored from a bad batch, a retried
batch stored once, rollups per policy version, pruning that keeps them, and the batch counts' rename
keeping every stored count."""

from __future__ import annotations

import importlib
from datetime import timedelta
from io import StringIO

import pytest
from django.apps import apps as django_apps
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from heliosweb.recipes.services import policy_set
from heliosweb.telemetry import buckets
from heliosweb.telemetry.ingest import telemetry_prune
from heliosweb.telemetry.models import LiveSequence, Rollup, TelemetryBatch, Totals
from heliosweb.telemetry.validation import Window, parse_batch
from scheduler_core.errors import InvalidInput

from .telemetry_records import NOW_MS, SESSION, body, finished, launch

MAX_TOKENS = 1_048_576


@pytest.fixture
def engine(recipe) -> Client:
    out = StringIO()
    call_command("create_api_token", engine="eng-1", recipes="tiny-cpu", stdout=out)
    return Client(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")


def post(client: Client, body):
    return client.post("/api/recipes/tiny-cpu/telemetry/", body, content_type="application/json")


def test_a_batch_is_stored_and_rolled_up_per_policy_version(engine, recipe):
    records = [launch(0), launch(1, graph=1024, end=1024, padded=0), finished(0), finished(1, ttft_ms=40.0)]
    response = post(engine, body(records, 1))
    assert response.status_code == 201
    assert response.json() == {
        "engine": "eng-1",
        "session": SESSION,
        "batch": 1,
        "stored": True,
        "launches": 2,
        "requests": 2,
    }
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
        (launch(t_ms=NOW_MS / 1000), "records[1].t_ms"),  # Unix seconds
        (launch(t_ms=NOW_MS - 25 * 3_600_000), "records[1].t_ms"),  # older than the raw window
        (launch(graph=MAX_TOKENS + 1, end=MAX_TOKENS + 1, padded=0), "records[1].graph"),
        (launch(graph=2**63 - 1, end=2**63 - 1, padded=0), "records[1].graph"),
        (launch(start=MAX_TOKENS, end=MAX_TOKENS + 1, graph=1, padded=0), "records[1].end"),
        (launch(ms=1e6 + 1), "records[1].ms"),
        (launch(request=-1), "records[1].request"),
        (launch(request=2**63), "records[1].request"),
        (launch(request=""), "records[1].request"),
        (launch(request="x" * 129), "records[1].request"),
        (launch(request="cmpl-\x00"), "records[1].request"),
        (launch(request=1.5), "records[1].request"),
        (finished(ttft_ms=1.7e308), "records[1].ttft_ms"),
        (finished(ttft_ms=1e6 + 0.5), "records[1].ttft_ms"),
        (finished(itl_ms=[1.0, 1e7]), "records[1].itl_ms[1]"),
        (finished(prompt_tokens=MAX_TOKENS + 1), "records[1].prompt_tokens"),
        (finished(launches=[512, MAX_TOKENS + 1]), "records[1].launches[1]"),
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
    response = post(engine, body([launch(), record], 7))
    assert response.status_code == 400 and response.json()["field"] == field, response.json()
    assert not TelemetryBatch.objects.exists() and not Rollup.objects.exists() and not Totals.objects.exists()


@pytest.mark.parametrize(
    ("sent", "field"),
    [
        (body([launch()], engine="eng-2"), "engine"),
        (body([launch()], -1), "batch"),
        (body([launch()], 2**63), "batch"),
        (body([]), "records"),
        (body([launch()] * 10_001), "records"),
        (body([launch()], boot=99), "boot"),
        (body([launch()], extra=1), "extra"),
        ({k: v for k, v in body([launch()]).items() if k != "schema"}, "schema"),
        (body([launch()], schema=1), "schema"),
        ({k: v for k, v in body([launch()]).items() if k != "session"}, "session"),
        (body([launch()], session="not-a-uuid"), "session"),
        (body([launch()], session=SESSION.upper()), "session"),
        ([launch()], "body"),
    ],
)
def test_a_bad_batch_is_named_and_nothing_is_stored(engine, sent, field):
    response = post(engine, sent)
    assert response.status_code == 400 and response.json()["field"] == field, response.json()
    assert not TelemetryBatch.objects.exists()


def test_a_retried_batch_is_answered_200_and_stored_once(engine):
    sent = body([launch(), finished()], 3)
    assert post(engine, sent).status_code == 201
    again = post(engine, sent)
    assert again.status_code == 200 and again.json()["stored"] is False
    assert (
        TelemetryBatch.objects.count() == 1
        and Rollup.objects.get().requests == 1
        and Totals.objects.get().requests == 1
    )
    assert post(engine, {**sent, "batch": 4}).status_code == 201
    assert list(TelemetryBatch.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2]  # no gap left


def test_the_same_number_with_other_records_is_a_409_naming_it_and_stores_nothing(engine):
    assert post(engine, body([launch(0)], 5)).status_code == 201
    other = post(engine, body([launch(1)], 5))
    assert other.status_code == 409 and other.json()["field"] == "batch", other.json()
    assert "batch 5" in other.json()["error"] and SESSION in other.json()["error"]
    assert TelemetryBatch.objects.count() == 1 and Totals.objects.get().prefill_launches == 1


def test_a_restarted_engine_numbering_from_1_in_a_new_session_loses_nothing(engine, recipe):
    assert post(engine, body([launch(0)], 1)).status_code == 201
    restarted = "7d0c7a8e-2f57-4df4-8d0e-5b6a0f3c9e21"
    answer = post(engine, body([launch(0, request="cmpl-after-restart")], 1, session=restarted))
    assert answer.status_code == 201 and answer.json()["stored"] is True
    assert sorted(TelemetryBatch.objects.values_list("session", "batch")) == sorted([(SESSION, 1), (restarted, 1)])
    assert Totals.objects.get().prefill_launches == 2


def test_batch_numbers_of_two_recipes_do_not_collide(engine, recipe):
    from heliosweb.recipes.services import recipe_create

    recipe_create(name="other", policy="cost")
    out = StringIO()
    call_command("create_api_token", engine="eng-1", recipes="tiny-cpu,other", stdout=out)
    both = Client(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")
    assert post(both, body([launch()], 1)).status_code == 201
    answer = both.post("/api/recipes/other/telemetry/", body([launch()], 1), content_type="application/json")
    assert answer.status_code == 201 and TelemetryBatch.objects.count() == 2


def test_string_request_ids_are_stored_as_sent(engine):
    records = [launch(0, request="cmpl-8f2e" + "a" * 100), finished(0, request="6f1c9b1e-2b1d-4c1b-9a0e-2d3f4e5a6b7c")]
    assert post(engine, body(records)).status_code == 201
    assert [r["request"] for r in TelemetryBatch.objects.get().records] == [r["request"] for r in records]


def test_a_batch_holds_one_version_with_the_policy_that_version_had(engine, recipe):
    policy_set(recipe=recipe, policy="rule")  # v2
    policy_set(recipe=recipe, policy="cost")  # v3
    mixed = post(engine, body([launch(), launch(1, policy="rule", version=2)]))
    assert mixed.status_code == 400 and mixed.json()["field"] == "records[1].version", mixed.json()
    wrong = post(engine, body([launch(policy="cost", version=2)]))  # v2 ran "rule": not renamed silently
    assert wrong.status_code == 400 and wrong.json()["field"] == "records[0].policy", wrong.json()
    assert post(engine, body([launch(policy="rule", version=2)], 1)).status_code == 201
    assert post(engine, body([launch(policy="cost", version=1)], 2)).status_code == 201
    assert sorted(Totals.objects.values_list("version", "policy")) == [(1, "cost"), (2, "rule")]


def test_a_maintainer_cannot_post_as_a_registered_engine(engine, maintainer):
    client = Client()
    client.force_login(maintainer)
    answer = post(client, body([launch()], engine="eng-1"))
    assert answer.status_code == 403 and answer.json()["field"] == "engine", answer.json()
    assert not TelemetryBatch.objects.exists()
    assert post(client, body([launch()], engine="bench-by-hand")).status_code == 201


def test_a_counter_that_would_pass_the_database_integer_is_refused_before_the_write(engine):
    assert post(engine, body([launch()], 1)).status_code == 201
    Totals.objects.update(launched_tokens=2**63 - 100)  # as if from a long life
    answer = post(engine, body([launch(1)], 2))  # + 512
    assert answer.status_code == 400 and answer.json()["field"] == "records", answer.json()
    assert "launched_tokens" in answer.json()["error"]
    assert TelemetryBatch.objects.count() == 1 and Totals.objects.get().launched_tokens == 2**63 - 100


def test_a_batch_within_a_minute_costs_the_recipe_the_rollup_the_totals_the_frame_and_the_insert(engine):
    """An upper bound on the queries of the hot path (timing is the bench's job)."""
    post(engine, body([launch()], 1))  # the token checked, the rows created
    with CaptureQueriesContext(connection) as queries:
        assert post(engine, body([launch(1), finished(1)], 2)).status_code == 201
    assert len(queries) <= 9, [q["sql"][:80] for q in queries]


def test_frame_numbers_go_on_from_the_highest_stored_once_the_counter_is_seeded(engine):
    seed = importlib.import_module("heliosweb.telemetry.migrations.0004_live_sequence").seed
    for number in (1, 2):
        post(engine, body([launch()], number))
    LiveSequence.objects.all().delete()  # a database from before the counter
    seed(django_apps, None)
    assert post(engine, body([launch()], 3)).status_code == 201
    assert TelemetryBatch.objects.get(batch=3).seq == 3


def test_the_batch_counts_renamed_keep_every_stored_count(transactional_db):
    before, after = [("telemetry", "0008_histograms_ten_percent_edges")], [("telemetry", "0009_batch_counts_renamed")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    recipe = old.get_model("recipes", "Recipe").objects.create(name="counted")
    old.get_model("telemetry", "TelemetryBatch").objects.create(
        recipe=recipe, engine="e", batch=1, received_at=timezone.now(), launches=3, requests=2, records=[], seq=1,
        frame={},
    )  # fmt: skip
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    renamed = executor.loader.project_state(after).apps.get_model("telemetry", "TelemetryBatch").objects.get()
    assert (renamed.launch_count, renamed.request_count) == (3, 2)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_pruning_drops_old_batches_and_keeps_rollups(engine, settings):
    assert post(engine, body([launch(), finished()], 1)).status_code == 201
    assert post(engine, body([launch()], 2)).status_code == 201
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
    assert post(client, body([launch()], engine="e")).status_code == 403
    client.force_login(maintainer)
    assert post(client, body([launch()], engine="e")).status_code == 201


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
        (launches(30, 17, version=2, policy="rule"), "records[17].version"),  # one version a batch
        (launches(30, 17, request="r" * 129), "records[17].request"),
        (launches(30, 17, request="\udfff"), "records[17].request"),  # a lone surrogate
        (launches(30, 17, graph=MAX_TOKENS * 2, end=MAX_TOKENS * 2, padded=0), "records[17].graph"),
        (launches(30, 17, ms=1e6 + 1), "records[17].ms"),
    ],
)
def test_the_first_bad_field_is_named_whichever_record_type_holds_it(records, field):
    """Launch records are checked a field at a time across the batch: a failure is still named in
    batch order (this test calls the parser directly, so it can send NaN, which JSON cannot)."""
    with pytest.raises(InvalidInput) as refused:
        parse_batch(
            body(records, 1),
            current_version=2,
            policy_of={1: "cost", 2: "rule"}.get,
            window=Window(now_ms=NOW_MS, oldest_ms=NOW_MS - 24 * 3_600_000),
        )
    assert refused.value.field == field


def test_mixed_batches_over_two_minutes_and_versions_are_stored_and_roll_up_to_independent_sums(engine, recipe):
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
    for version in (1, 2):  # a batch per version
        mine = [r for r in records if r["version"] == version]
        assert post(engine, body(mine, version)).status_code == 201
        assert TelemetryBatch.objects.get(batch=version).records == mine  # stored as posted
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


EDGES = [0, 1, -1, 211, 212, 300, 511, 512, 513, MAX_TOKENS, MAX_TOKENS + 1, 2**63 - 1, 2**63, 1e6, 1e6 + 1, 0.5]
EDGES += [float("nan"), float("inf"), True, None, "", "x", "cmpl-1", "\x00", "r" * 128, "r" * 129, [], [1], "rule"]
EDGES += ["cost", 2, NOW_MS, NOW_MS - 25 * 3_600_000, NOW_MS + 10 * 60_000, NOW_MS / 1000]


def test_the_column_checks_accept_exactly_what_the_record_checks_accept():
    """Launch records are read a column at a time; any batch that way accepted must pass the
    record-by-record checks too, and the reverse (2,000 batches, each with one to three fields of
    random records set to edge values)."""
    import random

    from heliosweb.telemetry.validation import _check_record, _Versions

    rng = random.Random(20)
    window = Window(now_ms=NOW_MS, oldest_ms=NOW_MS - 24 * 3_600_000)
    policy_of = {1: "cost", 2: "rule"}.get
    fields = [k for k in launch() if k != "type"]
    accepted = refused = 0
    for _ in range(2_000):
        records = [launch(i) for i in range(rng.randint(1, 6))]
        for _ in range(rng.randint(1, 3)):
            rng.choice(records)[rng.choice(fields)] = rng.choice(EDGES)
        try:
            parse_batch(body(records), current_version=2, policy_of=policy_of, window=window)
            fast = True
        except InvalidInput:
            fast = False
        versions = _Versions(2, policy_of)
        try:
            for i, record in enumerate(records):
                _check_record(record, f"records[{i}]", window, versions)
            slow = True
        except InvalidInput:
            slow = False
        assert fast == slow, records
        accepted, refused = accepted + fast, refused + (not fast)
    assert accepted > 50 and refused > 1_000  # both sides exercised
