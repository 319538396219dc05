"""The audit trail: one append-only, numbered, HMAC-chained list of every action on the product
(and every refused attempt and failed login), appended through `services.audit_append`. The ORM
and database triggers (`guard.py`) refuse to update or delete rows, so history changes only by
going around both, which the keyed chain reveals (`selectors.chain_verify`).
"""

from __future__ import annotations

from typing import Any, NoReturn

from django.conf import settings
from django.db import models


class AppendOnly(Exception):
    """An attempt to change or remove an audit row."""


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> NoReturn:
        raise AppendOnly("audit events are append-only: they cannot be updated")

    def delete(self) -> NoReturn:
        raise AppendOnly("audit events are append-only: they cannot be deleted")


class AuditEvent(models.Model):
    """One action. `hash` = HMAC-SHA256(key, canonical JSON of the event + `prev_hash`)."""

    seq = models.PositiveBigIntegerField(unique=True, help_text="1, 2, 3, … with no gaps")
    action = models.CharField(max_length=32, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+")
    actor_name = models.CharField(max_length=150, blank=True, help_text="the username at the time (or tried)")
    client_addr = models.CharField(max_length=64, blank=True, help_text="the client's address, where there was one")
    recipe_name = models.CharField(max_length=64, blank=True, db_index=True)
    object_type = models.CharField(max_length=32, blank=True, help_text="decision, job, boot, recipe, token, …")
    object_id = models.CharField(max_length=64, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(db_index=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} {self.object_type} {self.object_id} by {self.actor_name or '-'}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnly("audit events are append-only: they cannot be updated")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AppendOnly("audit events are append-only: they cannot be deleted")


class AuditChainLock(models.Model):
    """One row, locked while an event is appended, so two actions cannot extend the chain from one head."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)

    def __str__(self) -> str:
        return "audit chain lock"


class ChainCheck(models.Model):
    """The last full walk of the chain (one row, `services.chain_check_store`, run periodically):
    pages check only the events appended since. A broken walk stays broken until a later one."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    ok = models.BooleanField()
    count = models.PositiveBigIntegerField()
    head_seq = models.PositiveBigIntegerField(help_text="the last event the walk verified")
    head_hash = models.CharField(max_length=64)
    broken_at = models.PositiveBigIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    checked_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"chain checked to #{self.head_seq} at {self.checked_at:%Y-%m-%d %H:%M:%S} ({'ok' if self.ok else 'broken'})"
