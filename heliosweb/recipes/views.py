"""Recipe pages that change something: create, edit, and the emergency rollback. Thin: the
services validate, check permissions and audit."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from heliosweb.common.errors import http_status
from scheduler_core.errors import InvalidInput
from scheduler_core.policies import selectable_policies
from scheduler_core.tradeoff import CHECKLIST

from . import services
from .selectors import recipe_get


def _form_values(post: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The form's fields as the service takes them; shapes are JSON text in the form."""
    values: dict[str, Any] = {
        "description": post.get("description", ""),
        "hardware": post.get("hardware", ""),
        "required_evidence": post.getlist("required_evidence"),
    }
    try:
        values["shapes"] = json.loads(post.get("shapes") or "[]")
    except json.JSONDecodeError as exc:
        return values, {"shapes": f"not JSON: {exc.msg} at character {exc.pos}"}
    return values, {}


def _render(request: HttpRequest, recipe: Any, values: dict[str, Any], errors: dict[str, str]) -> HttpResponse:
    context = {
        "recipe": recipe,
        "values": values,
        "errors": errors,
        "policies": selectable_policies(),
        "checklist": CHECKLIST,
        "shapes_text": values["shapes_text"] if "shapes_text" in values else _shapes_text(values.get("shapes")),
    }
    return render(request, "recipes/form.html", context, status=400 if errors else 200)


def _shapes_text(shapes: Any) -> str:
    """Stored shapes as the form shows them: one per line, prefill before decode whatever order the
    database keeps keys in (PostgreSQL's jsonb sorts them); nothing for none (the placeholder shows)."""
    if not shapes:
        return ""
    ordered = ({k: s[k] for k in ("prefill", "decode") if k in s} | s for s in shapes)
    return "[\n" + ",\n".join(f"  {json.dumps(s)}" for s in ordered) + "\n]"


def _form_page(request: HttpRequest, recipe: Any, values: dict[str, Any], save: Any) -> HttpResponse:
    """The create and edit form: on a valid POST `save(values)` stores it and answers the success
    message; a refusal is shown at its field, the form keeping what was typed."""
    errors: dict[str, str] = {}
    if request.method == "POST":
        values, errors = _form_values(request.POST)
        if recipe is None:
            values.update(name=request.POST.get("name", ""), policy=request.POST.get("policy", ""))
        if not errors:
            try:
                saved, message = save(values)
            except InvalidInput as exc:
                errors[exc.field.split("[", 1)[0]] = exc.message
            else:
                messages.success(request, message)
                return redirect("recipe_detail", name=saved.name)
        values["shapes_text"] = request.POST.get("shapes", "")
    return _render(request, recipe, values, errors)


@login_required
@permission_required(services.MANAGE_PERM, raise_exception=True)
def recipe_new(request: HttpRequest) -> HttpResponse:
    def save(values: dict[str, Any]) -> tuple[Any, str]:
        recipe = services.recipe_create(actor=request.user, **values)
        return recipe, f"Recipe {recipe.name} created with policy {values['policy']} v1."

    values = {"name": "", "description": "", "hardware": "", "policy": "", "shapes": [], "required_evidence": []}
    return _form_page(request, None, values, save)


@login_required
@permission_required(services.MANAGE_PERM, raise_exception=True)
def recipe_edit(request: HttpRequest, name: str) -> HttpResponse:
    recipe = recipe_get(name=name)

    def save(values: dict[str, Any]) -> tuple[Any, str]:
        services.recipe_update(recipe=recipe, actor=request.user, **values)
        return recipe, f"Recipe {recipe.name} saved."

    return _form_page(request, recipe, services.recipe_fields(recipe), save)


@require_POST
@login_required
def recipe_rollback(request: HttpRequest, name: str) -> HttpResponse:
    recipe = recipe_get(name=name)
    try:
        setting = services.policy_rollback_emergency(
            recipe=recipe,
            actor=request.user,
            reason=request.POST.get("reason"),
            from_version=request.POST.get("from_version"),
        )
    except InvalidInput as exc:
        context = {"recipe": recipe, "error": str(exc)}
        return render(request, "recipes/refused.html", context, status=http_status(exc))
    messages.warning(
        request, f"{name} rolled back to {setting.policy} (v{setting.version}); propose a follow-up decision."
    )
    return redirect("recipe_detail", name=name)
