"""Reads of the audit trail: filtered lists for the page and exports, and the chain check."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from operator import attrgetter
from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers

from heliosweb.common.shapes import Shape, when
from scheduler_core.errors import InvalidInput

from .hashing import GENESIS, event_hash, event_payload
from .models import AuditEvent, ChainCheck

FILTERS = ("recipe", "actor", "action", "since", "until", "object_type", "object_id")


def _date(value: str, field: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(field, f"must be a date YYYY-MM-DD, got {value!r}") from None


def audit_events(
    *,
    recipe: str = "",
    actor: str = "",
    action: str = "",
    since: str = "",
    until: str = "",
    object_type: str = "",
    object_id: str = "",
) -> QuerySet[AuditEvent]:
    """Events matching every filter given, oldest first. `since`/`until` are dates (UTC), inclusive."""
    exact = dict(recipe_name=recipe, actor_name=actor, action=action, object_type=object_type, object_id=object_id)
    qs = AuditEvent.objects.filter(**{column: value for column, value in exact.items() if value})
    start = _date(since, "since") if since else None
    end = _date(until, "until") if until else None
    if start and end and end < start:
        raise InvalidInput("until", f"{until} is before since {since}")
    if start:
        qs = qs.filter(created_at__date__gte=start)
    if end:
        qs = qs.filter(created_at__date__lte=end)
    return qs.order_by("seq")


def audit_choices() -> dict[str, list[str]]:
    """The values the page's filters offer: every recipe, actor and action that appears."""
    return {  # order_by(): the model's ordering (seq) would join the DISTINCT and make every row distinct
        field: sorted(v for v in AuditEvent.objects.order_by().values_list(column, flat=True).distinct() if v)
        for field, column in (("recipe", "recipe_name"), ("actor", "actor_name"), ("action", "action"))
    }


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    count: int
    head_hash: str
    head_seq: int = 0
    broken_at: int | None = None  # the seq of the first event that does not check out
    reason: str = ""
    full_check_at: dt.datetime | None = None  # events up to the stored full walk's head were checked then

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def chain_verify(*, batch: int = 2000, start: ChainReport | None = None) -> ChainReport:
    """Walk the chain in order (all of it, or the events after `start`'s verified head) and report
    the first event whose number, `prev_hash` or keyed `hash` does not check out. Events cut from
    the end are invisible here: `anchors.anchor_check` catches them."""
    prev_hash, expected = (start.head_hash, start.head_seq + 1) if start else (GENESIS, 1)
    last_seq = expected - 1
    since = start.full_check_at if start else None
    while True:
        rows = list(AuditEvent.objects.filter(seq__gt=last_seq).order_by("seq")[:batch])
        if not rows:
            return ChainReport(True, expected - 1, prev_hash, expected - 1, full_check_at=since)
        for event in rows:
            broken = _broken(event, expected, prev_hash)
            if broken:
                return ChainReport(False, expected - 1, prev_hash, expected - 1, event.seq, broken, since)
            prev_hash, expected = event.hash, expected + 1
        last_seq = rows[-1].seq


def chain_verify_since_check() -> ChainReport:
    """The last stored full walk (`ChainCheck`), its head checked again, and the events appended
    since: what pages show, at the cost of the new events only. A broken walk is reported as found;
    with none stored, the whole chain is walked here."""
    check = ChainCheck.objects.filter(pk=1).first()
    if check is None:
        return chain_verify()
    at = check.checked_at
    if not check.ok:
        return ChainReport(False, check.count, check.head_hash, check.head_seq, check.broken_at, check.reason, at)
    mark = ChainReport(True, check.count, check.head_hash, check.head_seq, full_check_at=at)
    if check.head_seq:
        head = AuditEvent.objects.filter(seq=check.head_seq).first()
        problem = (
            f"event #{check.head_seq}, the head of the full check at {at:%Y-%m-%d %H:%M:%S} UTC, is gone"
            if head is None
            else _broken(head, check.head_seq, head.prev_hash)
            or ("" if head.hash == check.head_hash else f"event #{head.seq} changed since the full check at {at}")
        )
        if problem:
            return ChainReport(False, check.head_seq - 1, "", check.head_seq - 1, check.head_seq, problem, at)
    return chain_verify(start=mark)


def _broken(event: AuditEvent, expected: int, prev_hash: str) -> str:
    if event.seq != expected:
        return f"event #{event.seq} follows #{expected - 1}: events are missing"
    if event.prev_hash != prev_hash:
        return f"event #{event.seq} does not link to the previous event's hash"
    if event_hash(event_payload(event), event.prev_hash) != event.hash:
        return f"event #{event.seq} does not match its keyed hash: changed after it was written, or re-hashed without the key"
    return ""


def change_text(before: Any, after: Any) -> str:
    """What changed, readably: `status: pending → approved; version: 1 → 2` (only the keys that
    differ), or `policy=cost, version=1` for an event with nothing before."""
    old = before if isinstance(before, dict) else {}
    new = after if isinstance(after, dict) else {}
    if not old:
        return ", ".join(f"{k}={_short(v)}" for k, v in new.items() if v not in (None, "", []))
    keys = [k for k in dict.fromkeys([*old, *new]) if old.get(k) != new.get(k)]
    return "; ".join(f"{k}: {_short(old.get(k))} → {_short(new.get(k))}" for k in keys)


def _short(value: Any) -> str:
    return "—" if value is None else str(value)[:80]


_TEXT = serializers.CharField
EVENT: Shape[AuditEvent] = Shape(
    "AuditEvent",
    {
        "seq": (serializers.IntegerField(help_text="1, 2, 3, … with no gaps"), attrgetter("seq")),
        "action": (_TEXT(), attrgetter("action")),
        "actor": (_TEXT(help_text="the username at the time (or tried)"), attrgetter("actor_name")),
        "client_addr": (_TEXT(help_text="empty where there was no client"), attrgetter("client_addr")),
        "recipe": (_TEXT(), attrgetter("recipe_name")),
        "object_type": (_TEXT(help_text="decision, job, boot, recipe, token, …"), attrgetter("object_type")),
        "object_id": (_TEXT(), attrgetter("object_id")),
        "before": (serializers.DictField(allow_null=True), attrgetter("before")),
        "after": (serializers.DictField(allow_null=True), attrgetter("after")),
        "reason": (_TEXT(), attrgetter("reason")),
        "created_at": (serializers.DateTimeField(), lambda event: when(event.created_at)),
        "prev_hash": (_TEXT(help_text="the previous event's hash (64 zeros for event 1)"), attrgetter("prev_hash")),
        "hash": (_TEXT(help_text="HMAC-SHA256 of the event and prev_hash"), attrgetter("hash")),
    },
)
"""An event as the API and the exports show it: what the chain hashes (`hashing.event_payload`), less
the actor's id, with the server's own timestamp text and the two hashes."""
event_as_api = EVENT.of
