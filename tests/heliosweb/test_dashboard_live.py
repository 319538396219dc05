"""The dashboard follows decisions live in Debian's Chromium: a proposal appears under open
decisions, approval updates it, and applying it removes it and changes the recipe's policy."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.models import User
from django.db import connection

from heliosweb.decisions import services as decisions

from .conftest import log_in_and_open, needs_chromium

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]


def off_the_browser_thread(step, **kwargs):
    """Playwright's sync API runs an event loop in the test thread, where the services' after-commit
    `async_to_sync(group_send)` cannot run; a maintainer's request would come from another thread anyway."""

    def run():
        try:
            return step(**kwargs)
        finally:
            connection.close()  # the thread's own connection: leave none open for the test database's teardown

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


def test_the_dashboard_shows_each_decision_step_without_a_reload(stack, page, recipe, author, reviewer, applier):
    User.objects.create_user("watcher", password="pw-watcher-123")
    stack.start_web()
    log_in_and_open(page, f"{stack.base_url}/", "watcher", "pw-watcher-123")
    page.wait_for_function("document.getElementById('recipes-live').textContent === 'live'")

    decision = off_the_browser_thread(
        decisions.decision_propose, actor=author, recipe="tiny-cpu", policy="rule", rationale="PR #22 arms"
    )
    row = f'#open-decisions tr[data-decision="{decision.pk}"]'
    page.wait_for_selector(row)
    assert page.text_content(f"{row} .status") == "pending"

    decision = off_the_browser_thread(decisions.decision_approve, actor=reviewer, decision=decision)
    page.wait_for_function(f"document.querySelector('{row} .status').textContent === 'approved'")

    off_the_browser_thread(decisions.decision_apply, actor=applier, decision=decision)
    page.wait_for_selector(row, state="detached")
    tiny = '#recipes tr[data-recipe="tiny-cpu"]'
    page.wait_for_function(f"document.querySelector('{tiny} .version').textContent === 'v2'")
    assert page.text_content(f"{tiny} .policy") == "rule"
    assert "active policy now rule v2" in page.text_content("#latest-decision")
    assert page.is_visible("#no-open-decisions")


def test_a_new_job_appears_on_the_dashboard_and_runs_to_done_without_a_reload(stack, page, maintainer):
    from heliosweb.jobs.services import submission

    User.objects.create_user("watcher", password="pw-watcher-123")
    stack.start_web()
    log_in_and_open(page, f"{stack.base_url}/", "watcher", "pw-watcher-123")
    page.wait_for_function("document.getElementById('jobs').dataset.live === 'true'")

    job = off_the_browser_thread(
        submission.job_create, kind="pulse", params={"count": 40, "rate": 20.0}, user=maintainer
    )
    row = f'#jobs tr[data-job="{job.pk}"]'
    page.wait_for_selector(row)  # queued, then picked up by the real worker
    page.wait_for_function(f"document.querySelector('{row}').dataset.status === 'running'")
    page.wait_for_function(f"document.querySelector('{row}').dataset.status === 'done'")
    assert page.text_content(f"{row} .pct") == "100%"
    assert page.text_content(f"{row} td:nth-child(2)") == "pulse"
