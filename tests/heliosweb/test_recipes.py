import pytest

from heliosweb.recipes.services import policy_set, recipe_create
from scheduler_core.errors import InvalidInput


def test_rule_v1_can_never_be_a_recipes_active_policy(db):
    with pytest.raises(InvalidInput) as err:
        recipe_create(name="x", policy="rule-v1")
    assert err.value.field == "policy"
    recipe = recipe_create(name="y", policy="cost")
    with pytest.raises(InvalidInput):
        policy_set(recipe=recipe, policy="rule-v1")


def test_a_policy_change_bumps_the_version_and_a_no_op_does_not(db):
    recipe = recipe_create(name="z", policy="cost")
    assert policy_set(recipe=recipe, policy="rule").version == 2
    assert policy_set(recipe=recipe, policy="rule").version == 2
