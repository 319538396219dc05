"""Recipes in Debian's Chromium, as an operator who also maintains: create one through the form
(a refused field shown, then created), edit it, roll it back in an emergency with a reason, and see
the banner on the recipe page and the dashboard; a decision proposed afterwards shows what the
recipe's engines measured under each version. Screenshots in var/screenshots/recipe-*.png."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from heliosweb.decisions import services as decisions
from heliosweb.recipes.models import Recipe
from heliosweb.recipes.services import policy_set

from .conftest import log_in_and_open, needs_chromium
from .test_dashboard_live import off_the_browser_thread
from .test_tradeoff import served

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
SHAPES = '[{"prefill": 64, "decode": 0}, {"prefill": 128, "decode": 0}, {"prefill": 0, "decode": 8}]'


def test_an_operator_creates_edits_and_rolls_back_a_recipe_in_chromium(stack, page):
    SHOTS.mkdir(parents=True, exist_ok=True)
    mia = User.objects.create_user("mia", password="pw-mia-123")
    mia.groups.add(*Group.objects.filter(name__in=["maintainers", "operators"]))
    User.objects.create_user("avi", password="pw-avi-123").groups.add(Group.objects.get(name="maintainers"))
    stack.start_web()
    base = stack.base_url
    page.set_viewport_size({"width": 1280, "height": 900})

    log_in_and_open(page, f"{base}/recipes/new", "mia", "pw-mia-123")
    page.select_option("select[name=policy]", "cost")
    page.click("#recipe-form button[type=submit]")
    assert "required" in page.text_content('[data-field="name"]')
    page.fill("input[name=name]", "kimi-k3")
    page.fill("textarea[name=shapes]", SHAPES)
    page.check('input[name=required_evidence][value="liveness_fuzzed"]')
    page.click("#recipe-form button[type=submit]")
    page.wait_for_url(f"{base}/recipes/kimi-k3")
    assert "Recipe kimi-k3 created with policy cost v1." in page.text_content(".message")
    assert page.text_content("#recipe-policy") == "cost"

    page.click("#recipe-edit")
    page.wait_for_url(f"{base}/recipes/kimi-k3/edit")
    assert page.input_value("textarea[name=shapes]").splitlines()[1] == '  {"prefill": 64, "decode": 0},'
    page.fill("textarea[name=description]", "K3 on 8 H200s")
    page.screenshot(path=str(SHOTS / "recipe-edit.png"), full_page=True)
    page.click("#recipe-form button[type=submit]")
    page.wait_for_url(f"{base}/recipes/kimi-k3")
    assert "K3 on 8 H200s" in page.text_content("main")

    recipe = Recipe.objects.get(name="kimi-k3")
    off_the_browser_thread(policy_set, recipe=recipe, policy="rule")  # v2, as an applied decision would
    off_the_browser_thread(
        lambda: served(recipe, engine="eng-1", batch=1, version=2, policy="rule", ttfts=[7.0] * 40, chunks=[2048])
    )
    page.reload()
    page.click("#emergency-rollback summary")
    page.fill("#emergency-rollback input[name=reason]", "TTFT p99 doubled on eng-1 (pager 4411)")
    page.click("#emergency-rollback button.danger")
    page.wait_for_url(f"{base}/recipes/kimi-k3")
    banner = page.text_content(".banner.emergency")
    assert "Emergency rollback of kimi-k3: reverted from rule to cost (v3) at once, without approval, by mia" in (
        " ".join(banner.split())
    )
    assert "“TTFT p99 doubled on eng-1 (pager 4411)”" in banner
    assert "would undo the emergency rollback above" in page.text_content("#emergency-rollback summary")
    assert "approval requires: liveness fuzzed" in page.text_content("main")
    page.screenshot(path=str(SHOTS / "recipe-emergency.png"), full_page=True)
    page.goto(f"{base}/")
    assert "reverted from rule to cost (v3)" in " ".join(page.text_content(".banner.emergency").split())
    page.screenshot(path=str(SHOTS / "recipe-emergency-dashboard.png"), full_page=True)

    decision = off_the_browser_thread(
        decisions.decision_propose,
        actor=User.objects.get(username="avi"),
        recipe="kimi-k3",
        policy="rule",
        rationale="rule again, with the p99 explained",
    )
    page.goto(f"{base}/decisions/{decision.pk}")
    row = page.locator('#tradeoff-engine tr[data-version="2"]')
    assert "rule (proposed)" in row.text_content() and "6.90 ms" in row.text_content()  # p50: 7 ms, in (6.6, 7.2]
    page.locator("#tradeoff-engine").screenshot(path=str(SHOTS / "recipe-decision-engine.png"))
