"""Rows stored out of today's bounds before them (float counters on SQLite, `inf` sums) are
repaired by migration 0006, and then the trade-off, `/metrics` and the pages that read telemetry
all answer 200."""

from __future__ import annotations

import importlib

from django.apps import apps as django_apps
from django.db import connection
from django.test import Client

from heliosweb.decisions import services as decisions
from heliosweb.telemetry.models import Rollup, Totals

from .telemetry_records import body, finished, launch
from .test_telemetry import engine, post  # noqa: F401  (the engine fixture)

repair = importlib.import_module("heliosweb.telemetry.migrations.0006_engines_bounds_repair").repair


def store_raw(model: type, **values: float) -> None:
    """Write values as the old code let them in, past the ORM (and its field types)."""
    columns = ", ".join(f"{name} = %s" for name in values)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {model._meta.db_table} SET {columns}", list(values.values()))


def test_rows_out_of_bounds_are_repaired_and_flagged_and_every_reader_answers_200(engine, recipe, maintainer, author):  # noqa: F811
    assert post(engine, body([launch(), finished()])).status_code == 201
    broken = {"ttft_sum_ms": float("inf"), "itl_sum_ms": 1.7e308}
    if connection.vendor == "sqlite":  # there an overflowing counter became a float; PostgreSQL refused it
        broken |= {"launched_tokens": 1.8446744073709552e19, "padded_tokens": 212.0}
    for model in (Rollup, Totals):
        store_raw(model, **broken)
    decision = decisions.decision_propose(actor=author, recipe=recipe, policy="rule", rationale="r" * 30)
    client = Client()
    client.force_login(maintainer)
    assert b"+Inf" in client.get("/metrics").content  # what the issue saw: an infinite sum exported

    repair(django_apps, None)

    for row in (Rollup.objects.get(), Totals.objects.get()):
        assert row.repaired is not None and {"ttft_sum_ms", "itl_sum_ms"} <= row.repaired["fields"].keys()
        assert (row.ttft_sum_ms, row.itl_sum_ms, sum(row.ttft_buckets), sum(row.itl_buckets)) == (0.0, 0.0, 0, 0)
        assert row.prefill_launches == 1 and row.requests == 1  # what fitted is kept
        if connection.vendor == "sqlite":
            assert (row.launched_tokens, row.padded_tokens) == (0, 212) and type(row.padded_tokens) is int
            assert "launched_tokens" in row.repaired["fields"] and "padded_tokens" not in row.repaired["fields"]
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and b"+Inf" not in metrics.content.replace(b'le="+Inf"', b"")
    for url in (
        f"/api/decisions/{decision.pk}/tradeoff/",
        "/",
        "/recipes/tiny-cpu",
        "/recipes/tiny-cpu/live",
        "/recipes/tiny-cpu/live/panel",
        f"/decisions/{decision.pk}",
    ):
        assert client.get(url).status_code == 200, url
    # and the engine posts on: its counters add up again from the repaired rows
    assert post(engine, body([launch(1)], 2)).status_code == 201
    assert Totals.objects.get().prefill_launches == 2


def test_rows_within_the_bounds_are_left_as_they_are(engine):  # noqa: F811
    assert post(engine, body([launch(), finished()])).status_code == 201
    before = list(Totals.objects.values())
    repair(django_apps, None)
    assert list(Totals.objects.values()) == before and Totals.objects.get().repaired is None
