"""The audit trail: one append-only, keyed hash chain; the database refuses UPDATE and DELETE; a
re-hash without the key, a raw edit and a cut end are all detected."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from heliosweb.audit.anchors import anchor_append, anchor_check
from heliosweb.audit.hashing import event_hash, event_payload
from heliosweb.audit.models import AppendOnly, AuditEvent
from heliosweb.audit.selectors import audit_events, chain_verify, event_as_api
from heliosweb.audit.services import audit_append
from scheduler_core.errors import InvalidInput

TABLE = "audit_auditevent"


def three_events(user: User) -> list[AuditEvent]:
    return [
        audit_append(action="job_started", actor=user, object_type="job", object_id=1, recipe="tiny-cpu"),
        audit_append(action="boot_uploaded", actor=user, object_type="boot", object_id=7, recipe="tiny-cpu"),
        audit_append(action="login_failed", actor_name="mallory", client_addr="10.0.0.9", object_type="user"),
    ]


@contextmanager
def guard_dropped() -> Iterator[None]:
    """What someone with database access (but not the key) could do; the test transaction restores it."""
    statements = {
        "sqlite": ["DROP TRIGGER audit_event_no_update", "DROP TRIGGER audit_event_no_delete"],
        "postgresql": [f"DROP TRIGGER audit_event_append_only ON {TABLE}"],
    }[connection.vendor]
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)
    yield


def test_events_are_numbered_and_chained_and_the_chain_verifies(viewer):
    events = three_events(viewer)
    assert [(e.seq, e.action, e.actor_name) for e in events] == [
        (1, "job_started", "viewer"),
        (2, "boot_uploaded", "viewer"),
        (3, "login_failed", "mallory"),
    ]
    assert events[2].actor is None and events[2].client_addr == "10.0.0.9"
    assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]
    report = chain_verify()
    assert (report.ok, report.count, report.head_seq, report.head_hash) == (True, 3, 3, events[2].hash)


def test_the_orm_refuses_to_update_or_delete(viewer):
    [event, *_] = three_events(viewer)
    event.reason = "rewritten"
    for attempt in (event.save, event.delete, lambda: AuditEvent.objects.update(reason="x")):
        with pytest.raises(AppendOnly):
            attempt()
    with pytest.raises(AppendOnly):
        AuditEvent.objects.all().delete()
    assert AuditEvent.objects.filter(reason="").count() == 3


@pytest.mark.parametrize(
    "sql", [f"UPDATE {TABLE} SET reason = 'rewritten'", f"DELETE FROM {TABLE} WHERE seq = 2", f"DELETE FROM {TABLE}"]
)
def test_the_database_itself_refuses_raw_update_and_delete(viewer, sql):
    three_events(viewer)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)
    assert AuditEvent.objects.filter(reason="").count() == 3


def test_a_sqlite_client_without_the_projects_function_cannot_delete(tmp_path):
    """The sqlite3 shell or a script: the DELETE trigger's function does not exist there."""
    import importlib
    import sqlite3

    migration = importlib.import_module("heliosweb.audit.migrations.0002_database_refuses_update_and_delete")
    outsider = sqlite3.connect(tmp_path / "copy.sqlite3")
    outsider.execute(f"CREATE TABLE {TABLE} (seq INTEGER, reason TEXT)")
    for sql in migration.SQLITE_CREATE:
        outsider.execute(sql)
    outsider.execute(f"INSERT INTO {TABLE} VALUES (1, '')")
    with pytest.raises(sqlite3.OperationalError, match="helios_audit_flushing"):
        outsider.execute(f"DELETE FROM {TABLE}")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        outsider.execute(f"UPDATE {TABLE} SET reason = 'x'")
    assert outsider.execute(f"SELECT count(*) FROM {TABLE}").fetchone() == (1,)


@pytest.mark.django_db(transaction=True)
def test_flush_still_empties_the_table():
    audit_append(action="recipe_created", actor_name="system", object_type="recipe", object_id="r")
    call_command("flush", verbosity=0, interactive=False)
    assert AuditEvent.objects.count() == 0


def test_a_raw_edit_breaks_the_chain_at_the_edited_event(viewer):
    three_events(viewer)
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET actor_name = 'someone else' WHERE seq = 2")
    report = chain_verify()
    assert (report.ok, report.broken_at, report.count) == (False, 2, 1)
    assert "keyed hash" in report.reason


def test_a_full_rehash_without_the_key_is_detected(viewer):
    """Whoever can write the database can recompute every hash, but not with the key."""
    three_events(viewer)
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET reason = 'edited' WHERE seq = 1")
        prev = "0" * 64
        for event in AuditEvent.objects.order_by("seq"):
            forged = event_hash(event_payload(event), prev, key=b"a guessed key")
            cursor.execute(f"UPDATE {TABLE} SET prev_hash = %s, hash = %s WHERE seq = %s", [prev, forged, event.seq])
            prev = forged
    report = chain_verify()
    assert (report.ok, report.broken_at) == (False, 1)


def test_a_removed_event_in_the_middle_breaks_the_chain(viewer):
    three_events(viewer)
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE seq = 2")
    report = chain_verify()
    assert (report.ok, report.broken_at) == (False, 3) and "missing" in report.reason


def test_an_anchor_file_detects_events_cut_from_the_end(viewer, tmp_path):
    three_events(viewer)
    anchors = tmp_path / "audit.anchors"
    assert anchor_check(anchors) == ""
    line = anchor_append(anchors, chain_verify())
    assert line.split()[1:] == ["3", AuditEvent.objects.get(seq=3).hash]
    audit_append(action="job_cancelled", actor=viewer, object_type="job", object_id=1)
    assert anchor_check(anchors) == ""  # growing is fine
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE seq >= 3")
    assert chain_verify().ok  # a shorter chain still verifies on its own...
    assert "cut from the end" in anchor_check(anchors)  # ...but not against the anchor


def test_filters_by_recipe_actor_action_and_dates(viewer):
    three_events(viewer)
    assert [e.seq for e in audit_events(recipe="tiny-cpu")] == [1, 2]
    assert [e.seq for e in audit_events(actor="mallory")] == [3]
    assert [e.seq for e in audit_events(action="boot_uploaded")] == [2]
    today = AuditEvent.objects.get(seq=1).created_at.date().isoformat()
    assert audit_events(since=today, until=today).count() == 3
    assert audit_events(since="2999-01-01").count() == 0
    with pytest.raises(InvalidInput) as exc:
        audit_events(since="yesterday")
    assert exc.value.field == "since"
    with pytest.raises(InvalidInput) as exc:
        audit_events(since="2026-02-02", until="2026-02-01")
    assert exc.value.field == "until"


def test_a_failed_login_is_recorded_with_the_name_tried_and_the_client_address(client, db):
    client.post("/accounts/login/", {"username": "root", "password": "guess"}, REMOTE_ADDR="192.0.2.7")
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_name, event.client_addr, event.actor) == (
        "login_failed",
        "root",
        "192.0.2.7",
        None,
    )


def test_a_refused_attempt_on_a_mutating_endpoint_is_recorded(client, viewer):
    client.force_login(viewer)
    response = client.post("/api/jobs/", {"kind": "pr22"}, content_type="application/json", REMOTE_ADDR="192.0.2.8")
    assert response.status_code == 403
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_name, event.client_addr) == ("refused", "viewer", "192.0.2.8")
    assert event.after == {"status": 403, "method": "POST", "path": "/api/jobs/"}


def test_reads_refused_are_not_recorded(client, db):
    assert client.get("/api/jobs/").status_code in (401, 403)
    assert AuditEvent.objects.count() == 0


def test_the_audit_page_filters_and_pages(client, viewer):
    for i in range(55):
        audit_append(action="job_started", actor=viewer, object_type="job", object_id=i + 1, recipe="tiny-cpu")
    audit_append(action="boot_uploaded", actor=viewer, object_type="boot", object_id=1, recipe="other")
    client.force_login(viewer)
    first = client.get("/audit/?recipe=tiny-cpu")
    assert first.status_code == 200
    assert first.context["page"].paginator.count == 55 and len(first.context["page"]) == 50
    assert b"page 1 of 2" in first.content and b"chain verified (56 events)" in first.content
    assert first.context["choices"]["recipe"] == ["other", "tiny-cpu"]  # each value once, however many events
    second = client.get("/audit/?recipe=tiny-cpu&page=2")
    assert [e.seq for e in second.context["page"]] == [51, 52, 53, 54, 55]
    bad = client.get("/audit/?since=never")
    assert bad.status_code == 400 and b"since: must be a date" in bad.content


def test_exports_hold_exactly_the_filtered_rows(client, viewer):
    three_events(viewer)
    client.force_login(viewer)
    rows = json.loads(b"".join(client.get("/audit/export.json?recipe=tiny-cpu").streaming_content))
    assert [(r["seq"], r["action"]) for r in rows] == [(1, "job_started"), (2, "boot_uploaded")]
    text = b"".join(client.get("/audit/export.csv?actor=mallory").streaming_content).decode()
    lines = list(csv.DictReader(io.StringIO(text)))
    assert [(r["seq"], r["action"], r["client_addr"]) for r in lines] == [("3", "login_failed", "10.0.0.9")]
    assert lines[0]["hash"] == AuditEvent.objects.get(seq=3).hash
    assert client.get("/audit/export.csv?until=x").status_code == 400


def test_an_event_as_shown_is_what_its_chain_hashes_less_the_actor_id_with_both_hashes(viewer):
    event = three_events(viewer)[0]
    event.refresh_from_db()
    shown, hashed = event_as_api(event), event_payload(event)
    assert set(shown) == set(hashed) - {"actor_id"} | {"prev_hash", "hash"}
    assert {k: v for k, v in shown.items() if k not in ("created_at", "prev_hash", "hash")} == {
        k: v for k, v in hashed.items() if k not in ("actor_id", "created_at")
    }
    assert (shown["created_at"], shown["hash"]) == (event.created_at.isoformat(), event.hash)


# --- each action writes exactly one event ------------------------------------------------------


def only_event(action: str) -> AuditEvent:
    [event] = AuditEvent.objects.filter(action=action)
    return event


def test_starting_and_cancelling_a_job_are_audited(client, maintainer, recipe):
    client.force_login(maintainer)
    job = client.post("/api/jobs/", {"kind": "pr22", "recipe": "tiny-cpu"}, content_type="application/json").json()
    started = only_event("job_started")
    assert (started.actor_name, started.object_id, started.recipe_name, started.after["kind"]) == (
        "maint",
        str(job["id"]),
        "tiny-cpu",
        "pr22",
    )
    assert client.post(f"/api/jobs/{job['id']}/cancel/").status_code == 200
    cancelled = only_event("job_cancelled")
    assert (cancelled.before, cancelled.after["status"]) == ({"status": "queued"}, "cancelled")


def test_uploading_a_boot_is_audited(client, maintainer, recipe):
    client.force_login(maintainer)
    catalog = [{"prefill": 64, "decode": 0, "ms": 1.0}]
    response = client.post("/api/recipes/tiny-cpu/boots/", {"catalog": catalog}, content_type="application/json")
    event = only_event("boot_uploaded")
    assert (event.actor_name, event.object_id, event.recipe_name) == ("maint", str(response.json()["id"]), "tiny-cpu")


def test_tokens_created_rotated_and_revoked_are_audited(viewer, recipe):
    call_command("create_api_token", "viewer", stdout=io.StringIO())
    with pytest.raises(CommandError, match="has an API token already"):  # it was shown once: refused, nothing new
        call_command("create_api_token", "viewer", stdout=io.StringIO())
    call_command("create_api_token", "viewer", "--rotate", stdout=io.StringIO())
    call_command("create_api_token", "viewer", "--revoke", stdout=io.StringIO())
    call_command("create_api_token", "--engine", "e1", "--recipes", "tiny-cpu", stdout=io.StringIO())
    call_command("create_api_token", "--engine", "e1", "--revoke", stdout=io.StringIO())
    rows = list(
        AuditEvent.objects.filter(action__startswith="token_").values_list("action", "object_type", "object_id")
    )
    assert rows == [
        ("token_created", "user_token", "viewer"),
        ("token_rotated", "user_token", "viewer"),
        ("token_revoked", "user_token", "viewer"),
        ("token_created", "engine_token", "e1"),
        ("token_revoked", "engine_token", "e1"),
    ]
    assert chain_verify().ok


def test_the_change_column_says_what_changed():
    from heliosweb.audit.selectors import change_text

    assert change_text({"status": "pending", "version": 1}, {"status": "approved", "version": 1}) == (
        "status: pending → approved"
    )
    assert change_text(None, {"policy": "cost", "version": 1, "shapes": []}) == "policy=cost, version=1"
    assert change_text({"status": None}, {"status": "pending"}) == "status: — → pending"
