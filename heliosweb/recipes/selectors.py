"""Reads for recipes."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers

from heliosweb.audit.models import AuditEvent
from heliosweb.common.api import json_body
from heliosweb.common.bounds import DB_INT_MAX
from heliosweb.common.errors import NotFound
from heliosweb.common.shapes import Key, Shape
from scheduler_core.catalog import MAX_CAPACITY, MAX_GRAPHS
from scheduler_core.errors import InvalidInput
from scheduler_core.tradeoff import CHECKLIST_ITEMS

from .models import EMERGENCY, PolicySetting, Recipe


def recipe_list() -> QuerySet[Recipe]:
    """Recipes with their policy, by name (with their latest boot: `catalogs.selectors.recipe_list_with_latest_boot`)."""
    return Recipe.objects.select_related("policy_setting").order_by("name")


def setting_of(recipe: Recipe) -> PolicySetting | None:
    """The recipe's policy setting, or None for one created around `recipe_create` (raw SQL, an
    old database): every reader shows such a recipe as having no policy rather than failing."""
    try:
        return recipe.policy_setting
    except PolicySetting.DoesNotExist:
        return None


def _setting(name: str) -> Callable[[Recipe], Any]:
    return lambda recipe: getattr(setting_of(recipe), name, None)  # None without a setting


_NAME = serializers.CharField()  # made first: a serializer lists its fields in the order they were made
_ACTIVE: dict[str, Key[Recipe]] = {
    "policy": (
        serializers.CharField(allow_null=True, help_text="null for a recipe without a policy setting"),
        _setting("policy"),
    ),
    "version": (serializers.IntegerField(allow_null=True), _setting("version")),
    "emergency": (
        serializers.DictField(allow_null=True, help_text="set by an emergency rollback until reviewed"),
        _setting("emergency"),
    ),
}
RECIPE_POLICY: Shape[Recipe] = Shape("RecipePolicy", {"recipe": (_NAME, attrgetter("name")), **_ACTIVE})
# A catalog's graphs without timings, as `services.parse_shapes` reads them (`Catalog.from_dicts`:
# its bounds, no other key; `ms`, if sent, is dropped).
SHAPES = json_body(
    "Shape",
    {
        "prefill": serializers.IntegerField(min_value=0, max_value=MAX_CAPACITY),
        "decode": serializers.IntegerField(min_value=0, max_value=MAX_CAPACITY),
        "ms": serializers.FloatField(
            required=False, allow_null=True, min_value=-DB_INT_MAX, max_value=DB_INT_MAX, help_text="ignored"
        ),
    },
    many=True,
    max_length=MAX_GRAPHS,
)
REQUIRED = serializers.ListField(
    child=serializers.ChoiceField(list(CHECKLIST_ITEMS)), help_text="checklist items required before approval"
)
HARDWARE = serializers.CharField(
    required=False,
    help_text='the GPU the recipe serves on ("A100"; "" = not declared): evidence from other hardware is marked',
)
RECIPE: Shape[Recipe] = Shape(
    "Recipe",
    {
        "name": (serializers.CharField(), attrgetter("name")),
        "description": (serializers.CharField(), attrgetter("description")),
        "shapes": (SHAPES, attrgetter("shapes")),
        "required_evidence": (REQUIRED, attrgetter("required_evidence")),
        "hardware": (HARDWARE, attrgetter("hardware")),
        **_ACTIVE,
    },
)
recipe_as_api = RECIPE.of


def recipe_policies() -> list[dict[str, Any]]:
    """Every recipe's active policy, as the API and the live stream show it (null: none set)."""
    return [RECIPE_POLICY.of(r) for r in Recipe.objects.select_related("policy_setting").order_by("name")]


def recipe_get(*, name: str) -> Recipe:
    recipe = Recipe.objects.select_related("policy_setting").filter(name=name).first()
    if recipe is None:
        raise NotFound("recipe", f"unknown recipe {name!r}")
    return recipe


def recipe_named(value: Any, *, field: str = "recipe") -> Recipe:
    """The recipe a request body names: not a name, or no such recipe, is bad input of `field`
    (400 naming it), where `recipe_get` answers a path's unknown recipe (404)."""
    if not isinstance(value, str):
        raise InvalidInput(field, "must be a recipe name")
    try:
        return recipe_get(name=value)
    except NotFound:
        raise InvalidInput(field, f"unknown recipe {value!r}") from None


def recipe_policy_get(*, name: str) -> dict[str, Any]:
    """What an engine reads: the active policy, its version, when it took effect, the decision that
    applied it (None outside the workflow) and the capacities to plan with (`recipe_capacities`).
    Decisions and boots are reached through their apps' reverse relations: no import upward."""
    recipe = recipe_get(name=name)
    setting = setting_of(recipe)
    if setting is None:
        raise NotFound("recipe", f"recipe {name!r} has no policy setting")
    decision = recipe.decisions.filter(applied_version=setting.version).values_list("id", flat=True).first()
    return {
        "recipe": name,
        "policy": setting.policy,
        "version": setting.version,
        "decided_at": setting.updated_at.isoformat(),
        "decision": decision,
        "capacities": recipe_capacities(recipe),
    }


def recipe_capacities(recipe: Recipe) -> list[int]:
    """The recipe's solo prefill capacities (its graphs with decode 0), ascending: its declared
    shapes, else those of its newest boot, else none (an engine then measures its own defaults)."""
    graphs: Any = recipe.shapes
    if not graphs:
        graphs = recipe.boots.order_by("-created_at").values_list("catalog", flat=True).first() or []
    return sorted({int(g["prefill"]) for g in graphs if g.get("decode") == 0 and int(g.get("prefill") or 0) > 0})


def recipe_policy_changes(*, name: str, limit: int = 50) -> list[dict[str, Any]]:
    """Every change of the recipe's active policy, oldest first, from the audit chain (the one
    setter records each), as the live page marks them: `{version, policy, from_policy, decided_at
    (ms), decision (id or None), emergency, by, reason}`."""
    recipe = recipe_get(name=name)
    rows = (
        AuditEvent.objects.filter(recipe_name=name, action="policy_changed", created_at__gte=recipe.created_at)
        .order_by("-seq")
        .values_list("before", "after", "created_at", "actor_name", "reason")[:limit]
    )
    decided = dict(recipe.decisions.filter(applied_version__isnull=False).values_list("applied_version", "id"))
    changes = []
    for before, after, at, by, reason in reversed(rows):
        version = (after or {}).get("version")
        changes.append(
            {
                "version": version,
                "policy": (after or {}).get("policy"),
                "from_policy": (before or {}).get("policy"),
                "decided_at": at.timestamp() * 1000,
                "decision": decided.get(version),
                "emergency": reason.startswith(EMERGENCY),
                "by": by,
                "reason": reason,
            }
        )
    return changes


def emergency_banner(event: AuditEvent) -> dict[str, Any]:
    """The banner an `emergency_rollback` event puts on its recipe, made from the event alone, so
    `audit_verify` can tell a banner edited around the service from the one the chain vouches for."""
    return {
        "by": event.actor_name,
        "at": event.created_at.isoformat(),
        "reason": event.reason,
        "version": (event.after or {}).get("version"),
        "from_policy": (event.before or {}).get("policy"),
    }


POLICY_EVENTS = ("recipe_created", "policy_changed")  # the events that set a recipe's policy


def policy_audit_mismatches() -> list[str]:
    """Recipes whose policy differs from their last policy event's (changed around `policy_set`)."""
    last: dict[str, tuple[dict[str, Any], dict[str, Any], int | None, int]] = {}
    events = AuditEvent.objects.filter(action__in=POLICY_EVENTS).order_by("seq")
    for name, action, before, after, actor_id, seq in events.values_list(
        "recipe_name", "action", "before", "after", "actor_id", "seq"
    ):
        previous = (before or {}).get("policy", "") if action == "policy_changed" else ""
        last[name] = (after or {}, {"previous_policy": previous}, actor_id, seq)
    problems = []
    for recipe in Recipe.objects.select_related("policy_setting").order_by("name"):
        setting = setting_of(recipe)
        now = {"policy": setting.policy, "version": setting.version} if setting else None
        said, previous, actor_id, seq = last.get(recipe.name, ({}, {}, None, 0))
        recorded = {"policy": said.get("policy"), "version": said.get("version")} if said else None
        if now != recorded:
            problems.append(f"recipe {recipe.name} is {_state(now)} but its last policy event says {_state(recorded)}")
        elif setting is not None and setting.updated_by_id != actor_id:
            problems.append(
                f"recipe {recipe.name}'s policy updated_by is user {setting.updated_by_id} but event #{seq} "
                f"was made by user {actor_id}"
            )
        elif setting is not None and setting.previous_policy != previous["previous_policy"]:
            problems.append(
                f"recipe {recipe.name}'s previous_policy is {setting.previous_policy!r} but event #{seq} "
                f"says {previous['previous_policy']!r}"
            )
    return problems


def _state(state: dict[str, Any] | None) -> str:
    return f"{state['policy']} v{state['version']}" if state else "nothing"


def policy_of_version(*, recipe: Recipe, version: int) -> str | None:
    """The policy `version` of the recipe ran (None: no such version): the setting's, or from the
    audit chain, which records every version change with `{policy, version}` before and after."""
    setting = setting_of(recipe)
    if setting is not None and version == setting.version:
        return setting.policy
    events = AuditEvent.objects.filter(object_type="recipe", object_id=recipe.name)
    for side in ("after", "before"):
        for state in events.filter(**{f"{side}__version": version}).values_list(side, flat=True)[:5]:
            if isinstance(state, dict) and isinstance(state.get("policy"), str):
                return state["policy"]
    return None


def change_label(change: dict[str, Any]) -> str:
    """A policy change as the live page labels it: "v3: rule (decision #3)", "v4: cost (emergency rollback by ora)"."""
    if change["decision"]:
        cause = f"decision #{change['decision']}"
    else:
        cause = f"{'emergency rollback' if change['emergency'] else 'changed'} by {change['by']}"
    return f"v{change['version']}: {change['policy']} ({cause})"
