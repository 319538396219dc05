"""Recipes managed in the product: created with their policy setting, edited, audited; the admin
goes through the same service; the emergency rollback."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from heliosweb.audit.models import AuditEvent
from heliosweb.common.errors import Forbidden
from heliosweb.recipes.models import PolicySetting, Recipe
from heliosweb.recipes.services import policy_rollback_emergency, policy_set, recipe_create, recipe_update
from scheduler_core.errors import InvalidInput

SHAPES = [{"prefill": 64, "decode": 0}, {"prefill": 128, "decode": 0}, {"prefill": 0, "decode": 8}]


def operator() -> User:
    user = User.objects.create_user("olga")
    user.user_permissions.add(*Permission.objects.filter(codename__in=["rollback_policy", "manage_recipes"]))
    return User.objects.get(pk=user.pk)


def test_a_recipe_is_created_with_its_policy_setting_and_one_audit_event(db):
    recipe = recipe_create(name="kimi-k3", description="K3 on 8 GPUs", policy="rule", shapes=SHAPES, actor=operator())
    assert (recipe.policy_setting.policy, recipe.policy_setting.version) == ("rule", 1)
    assert recipe.shapes == SHAPES and recipe.required_evidence == []
    event = AuditEvent.objects.exclude(action="privileges_changed").get()  # olga's grants have their own
    assert (event.action, event.actor_name, event.recipe_name) == ("recipe_created", "olga", "kimi-k3")
    assert event.after["policy"] == "rule" and event.after["version"] == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "a b"}, "name"),
        ({"name": "x", "policy": "rule-v1"}, "policy"),
        ({"name": "x"}, "policy"),  # a recipe is never without its policy: no default is guessed
        ({"name": "x", "shapes": [{"prefill": 0, "decode": 8}]}, "shapes"),
        ({"name": "x", "shapes": [{"prefill": 64}]}, "shapes[0].decode"),
        ({"name": "x", "required_evidence": ["vibes"]}, "required_evidence"),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(db, fields, field):
    with pytest.raises(InvalidInput) as exc:
        recipe_create(**fields)
    assert exc.value.field == field
    assert Recipe.objects.count() == 0 and PolicySetting.objects.count() == 0 and AuditEvent.objects.count() == 0


def test_creating_or_editing_needs_the_permission(recipe, viewer):
    with pytest.raises(Forbidden):
        recipe_create(name="other", actor=viewer)
    with pytest.raises(Forbidden):
        recipe_update(recipe=recipe, actor=viewer, description="x")
    assert Recipe.objects.count() == 1 and not AuditEvent.objects.filter(action="recipe_edited").exists()


@pytest.mark.parametrize("name", ["tiny-cpu", "TINY-CPU", "Tiny-Cpu"])
def test_a_duplicate_name_is_refused_whatever_its_case(recipe, name):
    with pytest.raises(InvalidInput, match="exists already") as refused:
        recipe_create(name=name, policy="rule")
    assert refused.value.field == "name" and Recipe.objects.count() == 1


def test_an_edit_is_audited_with_before_and_after_and_a_no_op_is_not(recipe):
    olga = operator()
    recipe_update(recipe=recipe, actor=olga, required_evidence=["numerics"], description="tiny")
    recipe_update(recipe=recipe, actor=olga, description="tiny")
    event = AuditEvent.objects.get(action="recipe_edited")
    assert event.before["required_evidence"] == [] and event.after["required_evidence"] == ["numerics"]
    assert Recipe.objects.get().description == "tiny"


def test_every_policy_change_is_audited_by_the_one_write_path(recipe, viewer):
    policy_set(recipe=recipe, policy="rule", user=viewer, reason="decision #1 applied")
    event = AuditEvent.objects.get(action="policy_changed")
    assert (event.before, event.after) == ({"policy": "cost", "version": 1}, {"policy": "rule", "version": 2})


def test_an_operator_rolls_back_at_once_with_a_reason_and_it_is_flagged(recipe):
    policy_set(recipe=recipe, policy="rule")
    setting = policy_rollback_emergency(
        recipe=recipe, actor=operator(), reason="TTFT p99 doubled on k3", from_version=2
    )
    assert (setting.policy, setting.version) == ("cost", 3)
    assert setting.emergency["reason"] == "TTFT p99 doubled on k3" and setting.emergency["by"] == "olga"
    event = AuditEvent.objects.get(action="emergency_rollback")
    assert (event.actor_name, event.before["policy"], event.after["policy"]) == ("olga", "rule", "cost")


def test_an_emergency_rollback_needs_the_permission_and_a_reason_and_a_previous_policy(recipe, viewer):
    with pytest.raises(Forbidden):
        policy_rollback_emergency(recipe=recipe, actor=viewer, reason="x", from_version=1)
    with pytest.raises(InvalidInput) as exc:
        policy_rollback_emergency(recipe=recipe, actor=operator(), reason="  ", from_version=1)
    assert exc.value.field == "reason"
    with pytest.raises(InvalidInput, match="nothing to roll back"):
        policy_rollback_emergency(
            recipe=recipe, actor=User.objects.get(username="olga"), reason="incident", from_version=1
        )
    assert PolicySetting.objects.get().version == 1


def test_the_admin_creates_a_recipe_through_the_service(admin_client):
    response = admin_client.post(
        "/admin/recipes/recipe/add/",
        {
            "name": "from-admin",
            "description": "added in the admin",
            "shapes": '[{"prefill": 64, "decode": 0}]',
            "required_evidence": '["numerics"]',
            "policy": "rule",
            "policy_setting-TOTAL_FORMS": "0",
            "policy_setting-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    recipe = Recipe.objects.get(name="from-admin")
    assert recipe.policy_setting.policy == "rule" and recipe.policy_setting.version == 1
    assert recipe.required_evidence == ["numerics"]
    assert AuditEvent.objects.filter(action="recipe_created", recipe_name="from-admin").count() == 1
    assert admin_client.get("/api/recipes/").status_code == 200


def test_the_admin_refuses_bad_shapes_with_a_form_error(admin_client):
    response = admin_client.post(
        "/admin/recipes/recipe/add/",
        {
            "name": "bad",
            "shapes": '[{"prefill": 0, "decode": 4}]',
            "required_evidence": "[]",
            "policy_setting-TOTAL_FORMS": "0",
            "policy_setting-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200 and b"no solo prefill graph" in response.content
    assert not Recipe.objects.filter(name="bad").exists()


def test_every_reader_tolerates_a_recipe_without_a_setting(client, viewer):
    """One made around the service (raw SQL, an old database): listed with no policy, never a 500."""
    from heliosweb.recipes.selectors import recipe_policies

    Recipe.objects.create(name="bare")
    client.force_login(viewer)
    assert client.get("/api/recipes/").json() == [
        {"recipe": "bare", "policy": None, "version": None, "emergency": None}
    ]
    assert recipe_policies()[0]["policy"] is None  # what /ws/recipes/ sends on connect
    assert client.get("/").status_code == 200
    assert client.get("/recipes/bare").status_code == 200
    assert client.get("/decisions/new").status_code in (200, 403)
    policy = client.get("/api/recipes/bare/policy")
    assert policy.status_code == 404 and policy.json()["field"] == "recipe"


def test_the_api_refuses_a_recipe_without_a_name_as_a_field_error(client, db):
    client.force_login(operator())
    response = client.post("/api/recipes/", {"policy": "rule"}, content_type="application/json")
    assert response.status_code == 400 and response.json()["field"] == "name"
    assert Recipe.objects.count() == 0


def test_the_recipe_form_shows_shapes_one_per_line_and_keeps_what_was_typed(client, recipe):
    client.force_login(operator())
    empty = client.get("/recipes/tiny-cpu/edit").content.decode()
    assert '"decode": 0}]\'></textarea>' in empty  # no shapes: an empty box, its placeholder shows the format
    assert client.post("/recipes/tiny-cpu/edit", {"description": "x", "shapes": '[{"prefill": 64, "decode": 0}, {"prefill": 0, "decode": 8}]'}).status_code == 302  # fmt: skip
    form = client.get("/recipes/tiny-cpu/edit").content.decode()
    assert (
        "[\n  {&quot;prefill&quot;: 64, &quot;decode&quot;: 0},\n  {&quot;prefill&quot;: 0, &quot;decode&quot;: 8}\n]"
        in form
    )
    assert 'href="/recipes/tiny-cpu">Cancel</a>' in form
    back = client.post("/recipes/tiny-cpu/edit", {"description": "x", "shapes": "[{oops"}).content.decode()
    assert ">[{oops</textarea>" in back and 'data-field="shapes"' in back


def test_a_recipe_declares_its_hardware_which_is_audited_and_refused_when_not_a_short_name(db):
    olga = operator()
    recipe = recipe_create(name="llama-a100", policy="cost", hardware=" A100 ", actor=olga)
    recipe_events = AuditEvent.objects.filter(object_type="recipe")  # olga's grants have their own events
    assert recipe.hardware == "A100" and recipe_events.get().after["hardware"] == "A100"
    edited = recipe_update(recipe=recipe, actor=olga, hardware="H100")
    assert edited.hardware == "H100" and recipe_events.last().before["hardware"] == "A100"
    for bad in (12, "x" * 65):
        with pytest.raises(InvalidInput) as refused:
            recipe_update(recipe=edited, actor=olga, hardware=bad)
        assert refused.value.field == "hardware"
    assert Recipe.objects.get(pk=recipe.pk).hardware == "H100"
