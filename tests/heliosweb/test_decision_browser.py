"""A decision with evidence in Chromium, one person per role: a maintainer proposes rule with pr22,
sweep and boots evidence and reads the trade-off and the checklist; an approver approves; an
operator applies; the audit page lists the events in order and exports them."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from heliosweb.decisions.models import PolicyDecision
from heliosweb.jobs.models import BenchmarkJob
from scheduler_core.analyses import ANALYSES

from .conftest import log_in_and_open, needs_chromium

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]
CONSOLE_ERRORS: list[str] = []
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def _done(recipe: Any, kind: str, **params: Any) -> BenchmarkJob:
    """Evidence computed in this process exactly as the worker would (the worker's own path is
    covered by the other browser and end-to-end tests)."""
    analysis = ANALYSES[kind]
    clean = analysis.validate(params)
    return BenchmarkJob.objects.create(
        kind=kind, queue="sim", recipe=recipe, params=clean, status="done", result=analysis.run(clean, lambda e: None)
    )


def _person(name: str, role: str) -> None:
    User.objects.create_user(name, password=f"pw-{name}-123").groups.add(Group.objects.get(name=role))


def _console(name: str, message: Any) -> None:
    """Errors on the pages; the browser's own favicon probe (the product has none) is not one."""
    if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):
        CONSOLE_ERRORS.append(f"{name}: {message.text} at {message.location.get('url')}")


def _as(browser: Any, base: str, url: str, name: str) -> Any:
    page = browser.new_context().new_page()
    page.set_default_timeout(60_000)
    page.on("console", lambda m: _console(name, m))
    log_in_and_open(page, f"{base}{url}", name, f"pw-{name}-123")
    return page


def test_propose_review_apply_and_audit_in_chromium(stack, page, recipe):
    CONSOLE_ERRORS.clear()
    jobs = [_done(recipe, "pr22"), _done(recipe, "sweep", count=16), _done(recipe, "boots", boots=3)]
    for name, role in (("mia", "maintainers"), ("avi", "approvers"), ("ora", "operators")):
        _person(name, role)
    stack.start_web()
    base, browser = stack.base_url, page.context.browser
    SHOTS.mkdir(parents=True, exist_ok=True)

    maintainer = _as(browser, base, "/decisions/new", "mia")
    maintainer.select_option("#id_recipe", "tiny-cpu")
    maintainer.select_option("#id_policy", "rule")
    maintainer.fill("#id_rationale", "PR #22: one launch instead of three, boot-invariant sequences.")
    maintainer.select_option("#id_evidence", [str(j.pk) for j in jobs])
    maintainer.click("#decision-form button[type=submit]")
    maintainer.wait_for_url("**/decisions/*")
    decision = PolicyDecision.objects.get()
    drift_row = maintainer.text_content('#tradeoff-arms tr[data-arm="14k"][data-catalog="drift"]')
    assert "9 launches 238.10 ms" in drift_row and "4 launches 232.10 ms" in drift_row
    assert "6 launches 232.10 ms" in drift_row  # the cost model on the repaired catalog
    assert "rule wins" in maintainer.text_content("#tradeoff-sweep")
    rule_boots = maintainer.text_content('#tradeoff-boots li[data-policy="rule"]')  # per prompt, as the boots job
    assert "at most 1 distinct launch sequence per prompt" in rule_boots and "3 of 3 prompts" in rule_boots
    boots_item = maintainer.locator('#checklist li[data-item="boots_compared"]')
    assert "done" in boots_item.get_attribute("class") and f"job #{jobs[2].pk}" in boots_item.text_content()
    assert "open" in maintainer.get_attribute('#checklist li[data-item="real_ttft"]', "class")
    assert maintainer.locator('[data-step="approve"]').count() == 0  # never one's own
    maintainer.screenshot(path=str(SHOTS / "decision-tradeoff.png"), full_page=True)

    approver = _as(browser, base, f"/decisions/{decision.pk}", "avi")
    approver.fill('form[data-step="approve"] input[name=reason]', "the trade is worth it")
    approver.click('form[data-step="approve"] button')
    approver.wait_for_function("document.getElementById('decision-status').textContent === 'approved'")
    assert approver.locator('[data-step="apply"]').count() == 0

    operator = _as(browser, base, f"/decisions/{decision.pk}", "ora")
    operator.click('form[data-step="apply"] button')
    operator.wait_for_function("document.getElementById('decision-status').textContent === 'applied'")

    operator.goto(f"{base}/audit/?recipe=tiny-cpu")
    actions = operator.eval_on_selector_all(
        "#audit-events tr[data-seq] td.action", "cells => cells.map(c => c.textContent)"
    )
    assert actions == ["recipe_created", "proposed", "approved", "policy_changed", "applied"]
    assert "chain verified" in operator.text_content("#chain-badge")
    operator.screenshot(path=str(SHOTS / "audit.png"), full_page=True)
    with operator.expect_download() as download:
        operator.click("#export-csv")
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    assert [r["action"] for r in rows] == actions
    assert [r["actor"] for r in rows][1:] == ["mia", "avi", "ora", "ora"]
    assert CONSOLE_ERRORS == []
