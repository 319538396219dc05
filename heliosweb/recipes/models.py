"""Model recipes and the policy each one runs. `PolicySetting` is the one place an engine reads its
active policy from; `services.policy_set` is its single write path."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models

from scheduler_core.policies import selectable_policies

# scheduler_core's selectable policies, read when the models load: the database constraint is a
# migration, so a newly registered policy becomes storable with `makemigrations`.
STORED_POLICIES = selectable_policies()
EMERGENCY = "emergency rollback: "  # how an emergency rollback's policy change gives its reason (audit, pages)


class Recipe(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    # The graph shapes an engine captures for this recipe ([{prefill, decode}]), as a catalog lists them.
    shapes = models.JSONField(default=list, blank=True)
    # The GPU its engines serve on ("A100"; "": not declared): evidence from other hardware is marked
    # (scheduler_core.evidence). `db_default`: inserts knowing no hardware (older migrations) work too.
    hardware = models.CharField(max_length=64, blank=True, db_default="")
    # Checklist items (scheduler_core.tradeoff.CHECKLIST_ITEMS) a decision must tick before approval.
    required_evidence = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        permissions = [
            ("manage_recipes", "Can create and edit recipes"),
            ("rollback_policy", "Can revert a recipe's policy at once in an incident (emergency rollback)"),
        ]

    def __str__(self) -> str:
        return self.name


class PolicySetting(models.Model):
    """A recipe's active solo-prefill policy; `version` increases with every change."""

    POLICY_CHOICES = [(p, p) for p in STORED_POLICIES]

    recipe = models.OneToOneField(Recipe, on_delete=models.CASCADE, related_name="policy_setting")
    policy = models.CharField(max_length=32, choices=POLICY_CHOICES)
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    previous_policy = models.CharField(max_length=32, blank=True, help_text="what an emergency rollback returns to")
    # Set by an emergency rollback ({by, at, reason, version}); cleared when a follow-up decision
    # on the recipe is reviewed. While set, the recipe page and the dashboard show a banner.
    emergency = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(policy__in=list(STORED_POLICIES)), name="policy_is_selectable"),
        ]

    def __str__(self) -> str:
        return f"{self.recipe.name}: {self.policy} v{self.version}"

    @property
    def emergency_at(self) -> datetime | None:
        """When the emergency rollback in force was made (for pages: `emergency` keeps it as text)."""
        return datetime.fromisoformat(self.emergency["at"]) if self.emergency else None
