"""Writes for recipes. `policy_set` is the single write path for a recipe's active policy: the
decision workflow (propose -> approve -> apply, hash-chained audit) calls it, and it alone
announces the new version (after commit) to engines long-polling the policy and to live pages."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from heliosweb.common.broadcast import publish
from scheduler_core.errors import InvalidInput
from scheduler_core.policies import selectable_policies

from .models import PolicySetting, Recipe


def recipe_create(*, name: str, description: str = "", policy: str = "cost") -> Recipe:
    _check_policy(policy)
    with transaction.atomic():
        recipe = Recipe.objects.create(name=name, description=description)
        PolicySetting.objects.create(recipe=recipe, policy=policy)
    return recipe


def recipe_ensure(*, name: str, description: str = "", policy: str = "cost") -> Recipe:
    recipe = Recipe.objects.filter(name=name).first()
    return recipe or recipe_create(name=name, description=description, policy=policy)


@transaction.atomic
def policy_set(*, recipe: Recipe, policy: str, user: User | None = None) -> PolicySetting:
    _check_policy(policy)
    setting = PolicySetting.objects.select_for_update().get(recipe=recipe)
    if setting.policy != policy:
        setting.policy = policy
        setting.version += 1
        setting.updated_by = user
        setting.save()
        message = {"type": "policy", "recipe": recipe.name, "policy": policy, "version": setting.version}
        transaction.on_commit(lambda: publish(policy_topic(recipe.name), message))
    return setting


def policy_topic(recipe_name: str) -> str:
    """The broadcast topic every change of a recipe's policy is published on (engines long-poll it)."""
    return f"policy.{recipe_name}"


def _check_policy(policy: str) -> None:
    if policy not in selectable_policies():
        raise InvalidInput(
            "policy", f"{policy!r} cannot be a recipe's active policy (expected one of {list(selectable_policies())})"
        )
