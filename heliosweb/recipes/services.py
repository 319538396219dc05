"""Writes for recipes. `policy_set` is the single write path for a recipe's active policy (decisions
and the emergency rollback call it). `recipe_create` is the one way a recipe comes to exist (page,
API, admin, demo data), so no recipe is ever without its setting."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Value
from django.db.models.functions import Lower, Replace

from heliosweb.audit.models import AuditEvent
from heliosweb.audit.services import audit_append
from heliosweb.common.errors import Conflict, Forbidden, NotFound
from heliosweb.common.inputs import parse_int
from heliosweb.common.permissions import Actor
from heliosweb.realtime.broadcast import publish
from heliosweb.realtime.push import send_event_on_commit
from scheduler_core.catalog import Catalog
from scheduler_core.errors import InvalidInput
from scheduler_core.policies import recipe_policy_named
from scheduler_core.tradeoff import parse_required
from scheduler_core.validation import require_text

from .consumers import GROUP
from .models import EMERGENCY, PolicySetting, Recipe
from .selectors import emergency_banner, recipe_get

MANAGE_PERM = "recipes.manage_recipes"
ROLLBACK_PERM = "recipes.rollback_policy"
MAX_DESCRIPTION = 2_000
MAX_REASON = 2_000
MAX_HARDWARE = 64
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # a recipe's name (the API schema says the same)
SYSTEM = "system"  # the actor name of changes made without a user (demo data, migrations)


def recipe_create(
    *,
    name: Any = None,  # required, but refused by _name with the field named (an API body may lack it)
    description: Any = "",
    policy: Any = None,  # required: refused by recipe_policy_named naming the field
    shapes: Any = None,
    required_evidence: Any = None,
    hardware: Any = "",
    actor: Actor | None = None,
) -> Recipe:
    """A recipe and its policy setting (version 1), in one transaction, audited. `actor` None is
    the system (demo data); a user needs the manage-recipes permission."""
    _require_manager(actor)
    clean = {
        "name": _name(name),
        "description": require_text(description, "description", max_length=MAX_DESCRIPTION),
        "shapes": parse_shapes(shapes or []),
        "required_evidence": parse_required(required_evidence or []),
        "hardware": _hardware(hardware),
    }
    recipe_policy_named(policy)
    with transaction.atomic():
        new_recipe_name(clean["name"])
        recipe = Recipe.objects.create(**clean)
        PolicySetting.objects.create(
            recipe=recipe, policy=policy, updated_by=actor if isinstance(actor, User) else None
        )
        _audit("recipe_created", recipe, actor, after={**recipe_fields(recipe), "policy": policy, "version": 1})
    return recipe


def recipe_ensure(*, name: str, description: str = "", policy: str = "cost") -> Recipe:
    try:
        return recipe_get(name=name)
    except NotFound:
        return recipe_create(name=name, description=description, policy=policy)


def recipe_update(
    *,
    recipe: Recipe,
    actor: Actor | None,
    description: Any = None,
    shapes: Any = None,
    required_evidence: Any = None,
    hardware: Any = None,
) -> Recipe:
    """Edit what a recipe says about itself (never its policy: a decision). Audited, before and after."""
    _require_manager(actor)
    changes: dict[str, Any] = {}
    if description is not None:
        changes["description"] = require_text(description, "description", max_length=MAX_DESCRIPTION)
    if shapes is not None:
        changes["shapes"] = parse_shapes(shapes)
    if required_evidence is not None:
        changes["required_evidence"] = parse_required(required_evidence)
    if hardware is not None:
        changes["hardware"] = _hardware(hardware)
    with transaction.atomic():
        locked = Recipe.objects.select_for_update().get(pk=recipe.pk)
        before = recipe_fields(locked)
        for field, value in changes.items():
            setattr(locked, field, value)
        locked.save(update_fields=list(changes) or None)
        if recipe_fields(locked) != before:
            _audit("recipe_edited", locked, actor, before=before, after=recipe_fields(locked))
    return locked


@transaction.atomic
def policy_set(*, recipe: Recipe, policy: str, user: User | None = None, reason: str = "") -> PolicySetting:
    """Change the active policy (a no-op when it is already active): version + 1, the previous
    policy kept for an emergency rollback, one `policy_changed` event, and, after commit, the news
    to engines (the policy topic) and to every open page (`/ws/recipes/`), whatever made the change."""
    recipe_policy_named(policy)
    setting = PolicySetting.objects.select_for_update().get(recipe=recipe)
    if setting.policy != policy:
        before = {"policy": setting.policy, "version": setting.version}
        setting.previous_policy = setting.policy
        setting.policy = policy
        setting.version += 1
        setting.updated_by = user
        setting.save()
        after = {"policy": policy, "version": setting.version}
        _audit("policy_changed", recipe, user, before=before, after=after, reason=reason)
        message = {"type": "policy", "recipe": recipe.name, "policy": policy, "version": setting.version}
        transaction.on_commit(lambda: publish(policy_topic(recipe.name), message))
        page = {
            **message,
            "type": "recipes.policy",
            "from_policy": before["policy"],
            "from_version": before["version"],
            "actor": user.get_username() if user else SYSTEM,
            "reason": reason,
            "emergency": reason.startswith(EMERGENCY),
        }
        send_event_on_commit(GROUP, page)
    return setting


def policy_rollback_emergency(*, recipe: Recipe, actor: Actor, reason: Any, from_version: Any) -> PolicySetting:
    """An operator reverts the recipe to its previous policy at once, without approval (an incident),
    with a reason: a policy change like any other plus its own audit event, flagged until a
    follow-up decision reviews it. `from_version` is the version the operator saw: if the policy has
    moved since (a double click, a second operator), Conflict, so a rollback never undoes another."""
    if not isinstance(actor, User) or not actor.is_authenticated or not actor.has_perm(ROLLBACK_PERM):
        raise Forbidden("actor", f"an emergency rollback needs the {ROLLBACK_PERM} permission")
    clean_reason = require_text(reason, "reason", max_length=MAX_REASON)
    if not clean_reason:
        raise InvalidInput("reason", "required: say what the incident is")
    if from_version in (None, ""):
        raise InvalidInput("from_version", "required: the policy version this rollback reverts (the one you saw)")
    seen = parse_int(from_version, field="from_version", minimum=1)
    with transaction.atomic():
        setting = PolicySetting.objects.select_for_update().get(recipe=recipe)
        if setting.version != seen:
            raise Conflict(
                "from_version",
                f"stale: {recipe.name} is at v{setting.version} ({setting.policy}), not v{seen}: "
                f"{_since_text(setting)}; reload and decide again",
            )
        if not setting.previous_policy:
            raise InvalidInput("recipe", f"{recipe.name} has had one policy only: there is nothing to roll back to")
        before = {"policy": setting.policy, "version": setting.version}
        setting = policy_set(
            recipe=recipe, policy=setting.previous_policy, user=actor, reason=f"{EMERGENCY}{clean_reason}"
        )
        after = {"policy": setting.policy, "version": setting.version}
        event = _audit("emergency_rollback", recipe, actor, before=before, after=after, reason=clean_reason)
        setting.emergency = emergency_banner(event)
        setting.save(update_fields=["emergency"])
    return setting


def _since_text(setting: PolicySetting) -> str:
    if setting.emergency and setting.emergency.get("version") == setting.version:
        return f"{setting.emergency.get('by')} rolled it back already (emergency rollback at {setting.emergency.get('at')})"
    who = setting.updated_by.get_username() if setting.updated_by else SYSTEM
    return f"changed by {who} at {setting.updated_at.isoformat(timespec='seconds')}"


def emergency_reviewed(*, recipe_id: int) -> None:
    """A follow-up decision was reviewed: the emergency banner goes (the caller audits the review)."""
    PolicySetting.objects.filter(recipe_id=recipe_id, emergency__isnull=False).update(emergency=None)


def _audit(action: str, recipe: Recipe, actor: Actor | None, **details: Any) -> AuditEvent:
    """An event about `recipe` by `actor` (None: the system)."""
    return audit_append(
        action=action,
        actor=actor,
        actor_name=SYSTEM,
        object_type="recipe",
        object_id=recipe.name,
        recipe=recipe.name,
        **details,
    )


def _require_manager(actor: Actor | None) -> None:
    if actor is not None and not actor.has_perm(MANAGE_PERM):
        raise Forbidden("actor", f"creating or editing a recipe needs the {MANAGE_PERM} permission")


def policy_topic(recipe_name: str) -> str:
    """The broadcast topic every change of a recipe's policy is published on (engines long-poll it)."""
    return f"policy.{recipe_name}"


def parse_shapes(shapes: Any) -> list[dict[str, int]]:
    """Catalog shapes as a catalog would list them, validated by the scheduler's own rules."""
    if not isinstance(shapes, list):
        raise InvalidInput("shapes", "must be a list of {prefill, decode}")
    if not shapes:
        return []
    catalog = Catalog.from_dicts([{**s, "ms": None} if isinstance(s, dict) else s for s in shapes], "shapes")
    return [{"prefill": g.prefill, "decode": g.decode} for g in catalog.graphs]


EDITABLE = ("description", "shapes", "required_evidence", "hardware")  # what the edit form and the audit show


def recipe_fields(recipe: Recipe) -> dict[str, Any]:
    return {f: getattr(recipe, f) for f in EDITABLE}


def _hardware(value: Any) -> str:
    """The GPU a recipe serves on, as a short name ("A100"), or "" for none declared."""
    return require_text(value or "", "hardware", max_length=MAX_HARDWARE).strip()


def name_key(name: str) -> str:
    """What a person reads in a recipe's name: `TINY-CPU`, `tiny_cpu` and `tiny-cpu` are one."""
    return name.lower().replace("_", "-")


def new_recipe_name(name: Any) -> str:
    """`name` as a new recipe may take it: refused when any recipe has it, ignoring case and `_`
    against `-` (to a person, and in an engine's configuration, `TINY-CPU` is `tiny-cpu`)."""
    clean = _name(name)
    keys = Recipe.objects.annotate(key=Replace(Lower("name"), Value("_"), Value("-")))
    same = keys.filter(key=name_key(clean)).first()
    if same is not None:
        also = "" if same.name == clean else f" as {same.name!r} (names are compared ignoring case, '_' as '-')"
        raise InvalidInput("name", f"a recipe named {clean!r} exists already{also}")
    return clean


def _name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("name", "required: a short name of letters, digits, '-' or '_'")
    name = name.strip()
    if not NAME.fullmatch(name):
        raise InvalidInput("name", f"{name[:80]!r}: at most 64 letters, digits, '-' or '_'")
    if name == "new":
        raise InvalidInput("name", "'new' is the page that creates recipes: choose another name")
    return name
