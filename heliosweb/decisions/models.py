"""Policy decisions and their audit trail.

A `PolicyDecision` proposes changing one recipe's active policy; it moves
pending -> approved -> applied (or pending -> rejected / withdrawn). Every step and comment
appends one event to the audit chain (`heliosweb.audit`). The writes live in `services.py`;
nothing here decides.
"""

from __future__ import annotations

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
    rollback_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="rollbacks",
        help_text="the applied decision this one reverts",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        # "approve" and "apply" are separate permissions (Flagsmith); proposing is a third.
        permissions = [
            ("propose_decision", "Can propose a policy decision"),
            ("approve_decision", "Can approve or reject another maintainer's policy decision"),
            ("apply_decision", "Can apply an approved policy decision"),
            ("comment_decision", "Can comment on a policy decision"),
        ]

    def __str__(self) -> str:
        return f"decision {self.pk}: {self.recipe_id} {self.from_policy} -> {self.to_policy} ({self.status})"


class DecisionComment(models.Model):
    """Plain text from a maintainer, shown in order with the decision's steps (escaped on every page)."""

    decision = models.ForeignKey(PolicyDecision, on_delete=models.PROTECT, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"comment {self.pk} on decision {self.decision_id}"
