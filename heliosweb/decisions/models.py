"""Policy decisions and their audit trail.

A `PolicyDecision` proposes changing one recipe's active policy; it moves
pending -> approved -> applied (or pending -> rejected / withdrawn). Every step writes one
`AuditEvent`: append-only, numbered, and hash-chained, so an edited, inserted or removed row
shows up in `selectors.audit_verify()`. The writes live in `services.py`; nothing here decides.
"""

from __future__ import annotations

from typing import Any, NoReturn

from django.conf import settings
from django.db import models


class DecisionStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"
    APPLIED = "applied"


OPEN = (DecisionStatus.PENDING, DecisionStatus.APPROVED)


class PolicyDecision(models.Model):
    recipe = models.ForeignKey("recipes.Recipe", on_delete=models.PROTECT, related_name="decisions")
    from_policy = models.CharField(max_length=32, help_text="the active policy when proposed")
    to_policy = models.CharField(max_length=32)
    base_version = models.PositiveIntegerField(help_text="the PolicySetting version the proposal was based on")
    rationale = models.TextField()
    evidence = models.ManyToManyField("jobs.BenchmarkJob", blank=True, related_name="decisions")
    status = models.CharField(
        max_length=16, choices=DecisionStatus.choices, default=DecisionStatus.PENDING, db_index=True
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_reason = models.TextField(blank=True)
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    applied_at = models.DateTimeField(null=True, blank=True)
    applied_version = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # "approve" and "apply" are separate permissions (Flagsmith); proposing is a third.
        permissions = [
            ("propose_decision", "Can propose a policy decision"),
            ("approve_decision", "Can approve or reject another maintainer's policy decision"),
            ("apply_decision", "Can apply an approved policy decision"),
        ]

    def __str__(self) -> str:
        return f"decision {self.pk}: {self.recipe_id} {self.from_policy} -> {self.to_policy} ({self.status})"


class AuditAction(models.TextChoices):
    PROPOSED = "proposed"
    APPROVED = "approved"
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"
    APPLIED = "applied"


class AppendOnly(Exception):
    """An attempt to change or remove an audit row."""


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> NoReturn:
        raise AppendOnly("audit events are append-only: they cannot be updated")

    def delete(self) -> NoReturn:
        raise AppendOnly("audit events are append-only: they cannot be deleted")


class AuditEvent(models.Model):
    """One step of one decision. `hash` = SHA-256(canonical JSON of the event + `prev_hash`).

    The ORM refuses to update or delete these rows, and a database trigger refuses UPDATE
    (see the migration), so history changes only by someone going around both, which the hash
    chain then reveals.
    """

    seq = models.PositiveBigIntegerField(unique=True, help_text="1, 2, 3, … with no gaps")
    action = models.CharField(max_length=16, choices=AuditAction.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    actor_name = models.CharField(max_length=150, help_text="the username at the time, kept in the hash")
    recipe = models.ForeignKey("recipes.Recipe", on_delete=models.PROTECT, related_name="+")
    recipe_name = models.CharField(max_length=64)
    decision = models.ForeignKey(PolicyDecision, on_delete=models.PROTECT, related_name="audit_events")
    before = models.JSONField(help_text="{status, policy, version} before the step")
    after = models.JSONField(help_text="{status, policy, version} after the step")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} decision {self.decision_id} by {self.actor_name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnly("audit events are append-only: they cannot be updated")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AppendOnly("audit events are append-only: they cannot be deleted")


class AuditChainLock(models.Model):
    """One row, locked (SELECT … FOR UPDATE) while an event is appended, so two concurrent
    decisions cannot both extend the chain from the same head."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)

    def __str__(self) -> str:
        return "audit chain lock"
