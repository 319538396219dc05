"""The one write path of the audit trail: `audit_append` (and the stored full check,
`chain_check_store`), called inside the transaction of the action it records, so both land or
neither. Only `common` lies below it, so every app can record its actions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from .hashing import GENESIS, event_hash, event_payload
from .models import AuditChainLock, AuditEvent, ChainCheck
from .selectors import ChainReport, chain_verify

Json = dict[str, Any] | None


def audit_append(
    *,
    action: str,
    actor: User | AnonymousUser | None = None,
    actor_name: str = "",
    object_type: str = "",
    object_id: Any = "",
    recipe: str = "",
    before: Json = None,
    after: Json = None,
    reason: str = "",
    client_addr: str = "",
) -> AuditEvent:
    """Append one event to the chain. `actor` is the user who acted (None or anonymous for a
    refused attempt or a failed login: then `actor_name` is the user name tried)."""
    user = actor if isinstance(actor, User) and actor.is_authenticated else None
    with transaction.atomic():
        AuditChainLock.objects.select_for_update().get_or_create(pk=1)
        head = AuditEvent.objects.order_by("-seq").only("seq", "hash").first()
        event = AuditEvent(
            seq=(head.seq + 1) if head else 1,
            action=action,
            actor=user,
            actor_name=(user.get_username() if user is not None else actor_name)[:150],
            client_addr=(client_addr or "")[:64],
            recipe_name=recipe or "",
            object_type=object_type,
            object_id=str(object_id) if object_id not in (None, "") else "",
            before=before,
            after=after,
            reason=reason,
            created_at=timezone.now(),
            prev_hash=head.hash if head else GENESIS,
        )
        event.hash = event_hash(event_payload(event), event.prev_hash)
        event.save()
    return event


def chain_check_store() -> ChainReport:
    """Walk the whole chain and store what it found (`ChainCheck`), where pages verify from (beat, `audit_verify`)."""
    report = chain_verify()
    now = timezone.now()
    fields = ("ok", "count", "head_seq", "head_hash", "broken_at", "reason")
    ChainCheck.objects.update_or_create(pk=1, defaults={**{f: getattr(report, f) for f in fields}, "checked_at": now})
    return replace(report, full_check_at=now)
