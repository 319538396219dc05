"""A reported value is one declaration (issue 31, item 3): an optional field declared `reported` on
the request record reaches the live frames, the live page's figures and `/metrics` with no other
edit; an engine on the previous schema is still read and told to upgrade, for the stated window."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import pytest
from django.test import Client
from helios_client import records

from heliosweb.figures.live import live_figures
from heliosweb.telemetry.models import TelemetryBatch, Totals

from .telemetry_records import body, finished, launch
from .test_metrics import scrape


@dataclass(frozen=True)
class QueuedRequest(records.RequestRecord):
    """The request record with a field no production file knows."""

    queue_ms: float | None = records.spec(
        "number",
        "time it waited before its first launch",
        0,
        records.MAX_MS,
        optional=True,
        reported=records.Reported("Queueing per finished request", "ms"),
    )


def post(client: Client, sent: dict):
    return client.post("/api/recipes/tiny-cpu/telemetry/", sent, content_type="application/json")


def test_a_reported_field_declared_here_reaches_the_live_frames_and_the_metrics(recipe, maintainer, monkeypatch):
    monkeypatch.setitem(records.RECORDS, "request", QueuedRequest)
    client = Client()
    client.force_login(maintainer)
    sent = [launch(0), finished(0, queue_ms=4.0), finished(1, queue_ms=8.5), finished(2)]  # the last leaves it out
    assert post(client, body(sent, 1)).status_code == 201, "an optional field may be left out"
    assert post(client, body([finished(3, queue_ms=1.5)], 2)).status_code == 201

    frames = [b.frame for b in TelemetryBatch.objects.order_by("seq")]
    assert [f["queue_ms"] for f in frames] == [6.25, 1.5]  # each batch's mean of the records that carry it
    assert Totals.objects.get().reported == {"queue_ms": [14.0, 3]}

    figures = {f["id"]: f for f in live_figures(changes=[], capacities=[512])}
    chart = figures["fig-queue_ms"]
    assert chart["title"] == "Queueing per finished request"
    [rule] = chart["growth"]  # each frame's mean, at its last record's time
    assert (rule["event"], rule["x"], rule["y"]) == ("frame", "t1", "queue_ms")

    [summary] = [s for name, s in scrape(client).items() if name == "helios_reported_queue_ms"]
    values = {s.name: s.value for s in summary if s.labels["engine"] == "eng-1" and s.labels["version"] == "1"}
    assert values == {"helios_reported_queue_ms_sum": 14.0, "helios_reported_queue_ms_count": 3.0}


def test_a_reported_field_out_of_its_bounds_is_refused_by_name(recipe, maintainer, monkeypatch):
    monkeypatch.setitem(records.RECORDS, "request", QueuedRequest)
    client = Client()
    client.force_login(maintainer)
    response = post(client, body([finished(0, queue_ms=-1.0)], 1))
    assert response.status_code == 400
    assert response.json()["field"] == "records[0].queue_ms"
    assert not TelemetryBatch.objects.exists()


def test_an_engine_on_the_previous_schema_is_stored_and_told_to_upgrade(recipe, maintainer):
    client = Client()
    client.force_login(maintainer)
    current = post(client, body([launch(0), finished(0)], 1))
    assert current.status_code == 201 and "upgrade" not in current.json()

    previous = post(client, body([launch(1), finished(1)], 2, schema=records.PREVIOUS_SCHEMA))
    assert previous.status_code == 201, previous.content
    upgrade = previous.json()["upgrade"]
    assert upgrade["schema"] == records.SCHEMA
    assert upgrade["read_until"] == records.PREVIOUS_READ_UNTIL.isoformat()
    assert TelemetryBatch.objects.count() == 2


@pytest.mark.parametrize("schema", [None, 1, records.PREVIOUS_SCHEMA - 1, records.SCHEMA + 1])
def test_a_schema_outside_the_window_is_refused_saying_what_is_read(recipe, maintainer, schema):
    client = Client()
    client.force_login(maintainer)
    sent = body([finished(0)], 1)
    if schema is None:
        del sent["schema"]
    else:
        sent["schema"] = schema
    response = post(client, sent)
    assert response.status_code == 400
    assert response.json()["field"] == "schema"
    assert f"reads schema {records.SCHEMA}, and {records.PREVIOUS_SCHEMA} until" in response.json()["error"]


def test_the_previous_schema_is_read_until_its_stated_day_and_not_after():
    last = records.PREVIOUS_READ_UNTIL
    assert records.schema_answer(records.PREVIOUS_SCHEMA, last)["read_until"] == last.isoformat()
    assert records.schema_answer(records.SCHEMA, last + timedelta(days=1)) is None
    with pytest.raises(ValueError, match="got schema 2"):
        records.schema_answer(records.PREVIOUS_SCHEMA, last + timedelta(days=1))
    assert date.today() <= last, "the window passed: drop PREVIOUS_SCHEMA's reading (docs/telemetry.md)"
