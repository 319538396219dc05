"""Pages verify the audit chain from its last stored full walk: the events appended since are
checked on every view, the walk's own head is checked again, and what a full walk found broken
stays broken on the pages until a later walk finds the chain whole."""

from __future__ import annotations

from django.db import connection

from heliosweb.audit.models import AuditEvent, ChainCheck
from heliosweb.audit.selectors import chain_verify_since_check
from heliosweb.audit.services import audit_append, chain_check_store
from heliosweb.audit.tasks import check_audit_chain

from .test_audit import TABLE, guard_dropped, three_events


def test_with_no_stored_walk_the_page_walks_the_whole_chain(viewer):
    three_events(viewer)
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET reason = 'edited' WHERE seq = 1")
    report = chain_verify_since_check()
    assert (report.ok, report.broken_at, report.full_check_at) == (False, 1, None)


def test_the_periodic_task_stores_the_full_walk_and_pages_extend_it_over_new_events(viewer):
    events = three_events(viewer)
    check_audit_chain()
    stored = ChainCheck.objects.get(pk=1)
    assert (stored.ok, stored.count, stored.head_seq, stored.head_hash) == (True, 3, 3, events[-1].hash)
    audit_append(action="job_cancelled", actor=viewer, object_type="job", object_id=1)
    newest = audit_append(action="job_started", actor=viewer, object_type="job", object_id=2)
    report = chain_verify_since_check()
    assert (report.ok, report.count, report.head_seq, report.head_hash) == (True, 5, 5, newest.hash)
    assert report.full_check_at == stored.checked_at


def test_an_event_appended_after_the_walk_and_then_edited_is_caught_on_the_page(viewer):
    three_events(viewer)
    chain_check_store()
    audit_append(action="job_cancelled", actor=viewer, object_type="job", object_id=1)
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET reason = 'edited' WHERE seq = 4")
    report = chain_verify_since_check()
    assert (report.ok, report.broken_at) == (False, 4) and "keyed hash" in report.reason


def test_the_walks_own_head_edited_is_caught_on_the_page(viewer):
    three_events(viewer)
    chain_check_store()
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET actor_name = 'someone else' WHERE seq = 3")
    report = chain_verify_since_check()
    assert (report.ok, report.broken_at) == (False, 3) and "keyed hash" in report.reason


def test_the_walks_own_head_cut_is_caught_on_the_page(viewer):
    three_events(viewer)
    chain_check_store()
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE seq = 3")
    report = chain_verify_since_check()
    assert (report.ok, report.broken_at) == (False, 3) and "is gone" in report.reason


def test_an_older_edit_shows_on_the_pages_once_the_next_full_walk_finds_it(viewer):
    """The pages' cost is the new events; an edit below the stored head is the next walk's to find."""
    three_events(viewer)
    chain_check_store()
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET reason = 'edited' WHERE seq = 1")
    assert chain_verify_since_check().ok  # not re-read on a page view
    walked = chain_check_store()
    assert (walked.ok, walked.broken_at) == (False, 1)
    report = chain_verify_since_check()
    assert (report.ok, report.broken_at, report.reason) == (False, 1, walked.reason)
    audit_append(action="job_cancelled", actor=viewer, object_type="job", object_id=1)
    assert not chain_verify_since_check().ok  # new events do not paper over it


def test_the_audit_page_says_when_the_chain_was_walked_in_full(client, viewer):
    three_events(viewer)
    chain_check_store()
    client.force_login(viewer)
    page = client.get("/audit/").content.decode()
    assert "chain verified (3 events)" in page and "walked in full" in page
    assert AuditEvent.objects.count() == 3
