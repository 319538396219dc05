"""Reads for recipes."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from heliosweb.common.errors import NotFound

from .models import Recipe


def recipe_list() -> QuerySet[Recipe]:
    """Recipes with their policy, by name (with their latest boot: `catalogs.selectors.recipe_list_with_latest_boot`)."""
    return Recipe.objects.select_related("policy_setting").order_by("name")


def recipe_policies() -> list[dict[str, Any]]:
    """Every recipe's active policy, as the API and the live stream show it."""
    return [
        {"recipe": r.name, "policy": r.policy_setting.policy, "version": r.policy_setting.version}
        for r in Recipe.objects.select_related("policy_setting").order_by("name")
    ]


def recipe_get(*, name: str) -> Recipe:
    recipe = Recipe.objects.select_related("policy_setting").filter(name=name).first()
    if recipe is None:
        raise NotFound("recipe", f"unknown recipe {name!r}")
    return recipe


def recipe_policy_get(*, name: str) -> dict[str, Any]:
    """What an engine reads: the active policy, its version, when it took effect and the decision
    that applied it (None for a recipe's first version, or a change made outside the workflow).
    The decision is found through the reverse relation the decisions app declares, so this layer
    imports nothing above it."""
    recipe = recipe_get(name=name)
    setting = recipe.policy_setting
    decision = recipe.decisions.filter(applied_version=setting.version).values_list("id", flat=True).first()
    return {
        "recipe": name,
        "policy": setting.policy,
        "version": setting.version,
        "decided_at": setting.updated_at.isoformat(),
        "decision": decision,
    }


def recipe_policy_changes(*, name: str, limit: int = 50) -> list[dict[str, Any]]:
    """The recipe's policy changes made by applied decisions, oldest first: `{version, policy,
    decided_at (ms), decision}`, what the live page marks (through the reverse relation the
    decisions app declares, as `recipe_policy_get` finds the current one)."""
    rows = (
        recipe_get(name=name)
        .decisions.filter(applied_version__isnull=False)
        .order_by("-applied_version")
        .values_list("applied_version", "to_policy", "applied_at", "id")[:limit]
    )
    return [
        {"version": v, "policy": p, "decided_at": at.timestamp() * 1000 if at else None, "decision": d}
        for v, p, at, d in reversed(rows)
    ]
