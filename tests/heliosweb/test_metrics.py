"""`/metrics`: parsed with prometheus_client's own parser, its counts equal the stored telemetry."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from heliosweb.recipes.services import policy_set
from heliosweb.telemetry.models import TelemetryBatch
from tests.heliosweb.telemetry_records import body, finished, launch

from .conftest import ROOT


def scrape(client: Client, **headers) -> dict[str, list]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    return {f.name: f.samples for f in text_string_to_metric_families(response.content.decode())}


def test_the_metrics_equal_the_stored_telemetry(recipe, maintainer):
    client = Client()
    client.force_login(maintainer)
    policy_set(recipe=recipe, policy="rule")
    batches = [
        [launch(0), launch(1, graph=1024, end=1000, padded=24), finished(0, ttft_ms=3.0), finished(1, ttft_ms=700.0)],
        [launch(2, policy="rule", version=2), finished(2, policy="rule", version=2, itl_ms=[1.0, 1.0, 90.0])],
    ]
    for n, records in enumerate(batches):
        sent = body(records, n)
        posted = client.post("/api/recipes/tiny-cpu/telemetry/", sent, content_type="application/json")
        assert posted.status_code == 201, posted.content
    families = scrape(client)
    stored = [r for b in TelemetryBatch.objects.all() for r in b.records]
    for version in (1, 2):
        mine = [r for r in stored if r["version"] == version]
        # counters per engine and version; histograms per version (one engine here: its counts)
        labels = {"recipe": "tiny-cpu", "version": str(version)}

        def value(family: str, sample: str, le: str | None = None, labels: dict = labels) -> float:
            found = [
                s.value
                for s in families[family]
                if s.name == sample and s.labels.items() >= labels.items() and (le is None or s.labels["le"] == le)
            ]
            assert len(found) == 1, (family, sample, found)
            return found[0]

        launches = [r for r in mine if r["type"] == "launch"]
        requests = [r for r in mine if r["type"] == "request"]
        gaps = [g for r in requests for g in r["itl_ms"]]
        assert {s.labels["engine"] for s in families["helios_prefill_launches"]} == {"eng-1"}
        assert "engine" not in families["helios_ttft_seconds"][0].labels
        assert value("helios_prefill_launches", "helios_prefill_launches_total") == len(launches)
        assert value("helios_padded_tokens", "helios_padded_tokens_total") == sum(r["padded"] for r in launches)
        assert value("helios_ttft_seconds", "helios_ttft_seconds_count") == len(requests)
        assert (
            abs(value("helios_ttft_seconds", "helios_ttft_seconds_sum") - sum(r["ttft_ms"] for r in requests) / 1000)
            < 1e-9
        )
        assert value("helios_ttft_seconds", "helios_ttft_seconds_bucket", "0.005") == sum(
            r["ttft_ms"] <= 5 for r in requests
        )
        assert value("helios_itl_seconds", "helios_itl_seconds_count") == len(gaps)
        assert value("helios_itl_seconds", "helios_itl_seconds_bucket", "0.05") == sum(g <= 50 for g in gaps)
    assert [(s.labels, s.value) for s in families["helios_policy_version"]] == [
        ({"recipe": "tiny-cpu", "policy": "rule"}, 2.0)
    ]
    assert {s.labels["state"]: s.value for s in families["helios_jobs"]}["queued"] == 0


def test_only_the_series_seen_in_the_window_are_exported_and_histograms_sum_every_engine(recipe, maintainer, settings):
    """Three engines under version 1, two still posting; version 2 seen only long ago: its series
    are dropped; at most HELIOS_METRICS_MAX_ENGINE_SERIES engine series, the rest counted."""
    from datetime import timedelta

    from django.utils import timezone

    from heliosweb.telemetry.models import Totals

    client = Client()
    client.force_login(maintainer)
    policy_set(recipe=recipe, policy="rule")
    batches = [
        (engine, 1, [finished(n, ttft_ms=10.0 * (n + 1)), launch(n)])
        for n, engine in enumerate(("eng-a", "eng-b", "eng-c"))
    ]
    batches.append(("eng-a", 2, [launch(9, policy="rule", version=2)]))
    for engine, n, records in batches:
        posted = client.post(
            "/api/recipes/tiny-cpu/telemetry/", body(records, n, engine=engine), content_type="application/json"
        )
        assert posted.status_code == 201, posted.content
    long_ago = timezone.now() - timedelta(seconds=settings.HELIOS_METRICS_WINDOW_SECONDS + 1)
    Totals.objects.filter(version=2).update(seen_at=long_ago)
    Totals.objects.filter(engine="eng-c").update(seen_at=long_ago)  # gone quiet: its counts stay in v1's sums
    families = scrape(client)
    counters = {(s.labels["engine"], s.labels["version"]) for s in families["helios_prefill_launches"]}
    assert counters == {("eng-a", "1"), ("eng-b", "1")}
    ttft = {s.labels["version"]: s.value for s in families["helios_ttft_seconds"] if s.name.endswith("_count")}
    assert ttft == {"1": 3.0}  # every engine of version 1, eng-c included: the sum never goes down
    left_out = {s.labels["kind"]: s.value for s in families["helios_metrics_series_left_out"]}
    assert left_out == {"engine_version": 0, "histogram_version": 0}
    settings.HELIOS_METRICS_MAX_ENGINE_SERIES = 1
    Totals.objects.filter(version=2).update(seen_at=timezone.now())  # version 2 seen again
    settings.HELIOS_METRICS_MAX_VERSIONS = 1
    families = scrape(client)
    assert len(families["helios_prefill_launches"]) == 1
    assert {s.labels["version"] for s in families["helios_ttft_seconds"]} == {"2"}  # the latest version only
    left_out = {s.labels["kind"]: s.value for s in families["helios_metrics_series_left_out"]}
    assert left_out == {"engine_version": 2, "histogram_version": 1}  # eng-a v1, eng-b v1; version 1


def test_metrics_need_the_token_when_one_is_set_and_a_local_client_otherwise(recipe, settings):
    assert Client().get("/metrics").status_code == 200  # the test client is 127.0.0.1
    assert Client(REMOTE_ADDR="10.0.0.7").get("/metrics").status_code == 403
    settings.HELIOS_METRICS_TOKEN = "s3cret"
    assert Client().get("/metrics").status_code == 403
    assert "helios_policy_version" in scrape(Client(), HTTP_AUTHORIZATION="Bearer s3cret")


@pytest.mark.e2e  # a real broker: the `queued` fixture lets the send through
def test_queue_depth_counts_the_tasks_waiting_under_this_stacks_key_prefix(db, redis_url, settings):
    """A task sent through Celery, as a job is, waits under the session's own key prefix
    (`HELIOS_BROKER_KEY_PREFIX`): the gauge reads it there, and nothing another stack queued."""
    import redis

    from heliosweb.celery import app

    from .conftest import BROKER_KEY_PREFIX, use_redis

    use_redis(redis_url, settings)
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {
        **settings.CELERY_BROKER_TRANSPORT_OPTIONS,
        "global_keyprefix": BROKER_KEY_PREFIX,
    }
    client = redis.Redis.from_url(redis_url)
    key = BROKER_KEY_PREFIX + "maint"  # no worker of the test session consumes `maint`
    client.delete(key)
    try:
        client.rpush("maint", b"another stack's task")
        app.send_task("heliosweb.not_a_task", queue="maint")
        assert client.llen(key) == 1
        depth = {s.labels["queue"]: s.value for s in scrape(Client())["helios_queue_depth"]}
        assert depth["maint"] == 1 and set(depth) == {"sim", "sim_long", "gpu", "engine", "maint"}
    finally:
        client.delete(key)
        client.lrem("maint", 0, b"another stack's task")


def test_every_grafana_panel_has_a_unit_and_queries_only_metrics_the_product_exports(db):
    """The board's expressions name series `/metrics` serves (a renamed metric fails here, not on
    an operator's screen); each is evaluated against a real Prometheus in test_prometheus."""
    board = json.loads((ROOT / "docs" / "grafana-helios.json").read_text())
    served = set()
    for family in text_string_to_metric_families(Client().get("/metrics").content.decode()):
        suffixes = (
            ("_bucket", "_count", "_sum")
            if family.type == "histogram"
            else ("_total",)
            if family.type == "counter"
            else ("",)
        )
        served |= {family.name + s for s in suffixes}
    for panel in board["panels"]:
        assert panel["fieldConfig"]["defaults"].get("unit"), panel["title"]
        for target in panel["targets"]:
            used = set(re.findall(r"helios_\w+", target["expr"]))
            assert used and used <= served, (panel["title"], used - served)


@pytest.mark.usefixtures("fresh_counters")  # the snapshot left behind goes with the cache
def test_a_scrape_serves_the_snapshot_while_it_is_kept_and_computes_afresh_without_one(recipe, settings):
    """What a scrape reads: the exposition beat kept (`snapshot_metrics`), one period behind the
    database at most; a fresh one once it is gone, or with snapshots off."""
    from django.core.cache import cache

    from heliosweb.telemetry.metrics_snapshot import KEY
    from heliosweb.telemetry.tasks import snapshot_metrics

    client = Client()
    settings.HELIOS_METRICS_SNAPSHOT_SECONDS = 10
    assert snapshot_metrics() > 0
    policy_set(recipe=recipe, policy="rule")  # the version moves after the snapshot
    version = [s.value for s in scrape(client)["helios_policy_version"]]
    assert version == [1]  # as the snapshot stood
    cache.delete(KEY)
    assert [s.value for s in scrape(client)["helios_policy_version"]] == [2]
    assert snapshot_metrics() > 0
    settings.HELIOS_METRICS_SNAPSHOT_SECONDS = 0
    policy_set(recipe=recipe, policy="cost")
    assert [s.value for s in scrape(client)["helios_policy_version"]] == [3]
    assert snapshot_metrics() == 0
