"""Every change of a recipe's policy reaches every open page live (issue 21): after a decision is
applied, an emergency rollback (a change made without a decision, through the same one setter)
shows, without a reload, on the open dashboard (row and banner), the recipe page, the live page (a
marker and the before/after panel of that change) and the decision's page ("rolled back")."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from heliosweb.decisions import services as decisions
from heliosweb.recipes.services import policy_rollback_emergency

from .conftest import log_in_and_open, needs_chromium
from .test_dashboard_live import off_the_browser_thread

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]


def test_an_emergency_rollback_reaches_every_open_page(stack, page, recipe, author, reviewer):
    decision = off_the_browser_thread(
        decisions.decision_propose, actor=author, recipe="tiny-cpu", policy="rule", rationale="deterministic"
    )
    off_the_browser_thread(decisions.decision_approve, actor=reviewer, decision=decision)
    off_the_browser_thread(decisions.decision_apply, actor=author, decision=decision)
    # A user name with markup in it: every page writes it as text (the live panel wrote it as HTML).
    operator = User.objects.create_superuser("ora<i>n</i>", password="pw-ora-123")
    stack.start_web()
    base = stack.base_url
    context = page.context.browser.new_context(bypass_csp=True)  # one person, four tabs
    tabs = {name: context.new_page() for name in ("dashboard", "recipe", "live", "decision")}
    log_in_and_open(tabs["dashboard"], f"{base}/", "ora<i>n</i>", "pw-ora-123")
    tabs["recipe"].goto(f"{base}/recipes/tiny-cpu")
    tabs["live"].goto(f"{base}/recipes/tiny-cpu/live")
    tabs["decision"].goto(f"{base}/decisions/{decision.pk}")
    for name in ("dashboard", "recipe", "decision"):
        tabs[name].set_default_timeout(60_000)
        tabs[name].wait_for_function("document.documentElement.dataset.policies === 'live'")
    tabs["live"].set_default_timeout(60_000)
    tabs["live"].wait_for_function("document.getElementById('connection').textContent === 'live'")
    before = f"v2: rule (decision #{decision.pk})"
    tabs["live"].wait_for_function(
        f"document.querySelector('[data-figure-id=fig-chunks]').textContent.includes({before!r})"
    )
    assert tabs["decision"].text_content("#decision-status") == "applied"

    off_the_browser_thread(
        policy_rollback_emergency, recipe=recipe, actor=operator, reason="p99 doubled", from_version=2
    )

    dash = tabs["dashboard"]
    dash.wait_for_function(
        "document.querySelector('#recipes tr[data-recipe=\"tiny-cpu\"] .version').textContent === 'v3'"
    )
    assert dash.text_content("#recipes tr[data-recipe='tiny-cpu'] .policy") == "cost"
    banner = dash.locator("#latest-decision")
    assert "Emergency rollback of tiny-cpu by ora<i>n</i>: rule v2 → cost v3" in banner.text_content()
    assert banner.get_attribute("role") == "alert" and "emergency" in banner.get_attribute("class")
    tabs["recipe"].wait_for_function("document.querySelector('[data-live-version]').textContent === 'v3'")
    assert tabs["recipe"].text_content("#recipe-policy") == "cost"
    marker = "v3: cost (emergency rollback by ora<i>n</i>)"
    # Plotly draws its own few tags (<i>, <b>) in a chart's text as styled text, never as page markup
    charted = "v3: cost (emergency rollback by oran)"
    tabs["live"].wait_for_function(
        f"document.querySelector('[data-figure-id=fig-chunks]').textContent.includes({charted!r})"
    )
    tabs["live"].wait_for_function(f"(document.getElementById('panel-label') || {{}}).textContent === {marker!r}")
    assert tabs["live"].text_content("#live-policy") == "cost v3"
    assert tabs["live"].locator("#panel-label i").count() == 0  # text, not an element
    headers = tabs["live"].locator("#panel-table thead th").all_text_contents()
    assert headers[1:] == ["before: v2 rule", "after: v3 cost"]  # the rollback's before/after, not decision #1's
    tabs["decision"].wait_for_function("document.getElementById('decision-status').textContent === 'rolled back'")
    tabs["decision"].reload()  # and so it stays
    assert tabs["decision"].text_content("#decision-status") == "rolled back"
    assert "reverted this decision's v2 (now v3)" in tabs["decision"].text_content("#rolled-back")
