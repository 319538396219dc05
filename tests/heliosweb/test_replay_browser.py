"""Counterfactual replay in Debian's Chromium: the live page of a recipe whose engine posted telemetry
offers "what the other policy would have done"; its form queues a replay, a real worker runs it, the
job page draws the comparison, and the live page then shows the latest replay's rows; a decision
citing the replay shows each policy replayed beside what was served in its trade-off. At 1280 and
390 px (screenshots in var/screenshots/replay-*.png)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from heliosweb.jobs.models import BenchmarkJob

from .conftest import log_in_and_open, needs_chromium
from .telemetry_records import body, engine_served
from .test_dashboard_live import off_the_browser_thread

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def _post_telemetry() -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("create_api_token", engine="eng-1", recipes="tiny-cpu", stdout=out)
    engine = Client(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")
    answer = engine.post(
        "/api/recipes/tiny-cpu/telemetry/", body(engine_served("cost", 40)), content_type="application/json"
    )
    assert answer.status_code == 201, answer.content


def test_the_live_page_offers_the_replay_and_opens_its_result(stack, page, recipe, maintainer, author):
    SHOTS.mkdir(parents=True, exist_ok=True)
    off_the_browser_thread(_post_telemetry)
    stack.start_web()
    base = stack.base_url
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in_and_open(page, f"{base}/recipes/tiny-cpu/live", "maint", "pw-maint-123")
    form = page.locator("#replay-form")
    assert "What the other policy would have done" in page.text_content("#replay")
    assert form.locator("select[name=engine] option").all_text_contents() == ["all engines", "eng-1"]
    page.locator("#replay").screenshot(path=str(SHOTS / "replay-live-form-1280.png"))
    form.locator("select[name=execution]").select_option("affine")
    form.locator("select[name=window_min]").select_option("15")
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/jobs/*")
    page.wait_for_function("document.getElementById('job-status').textContent === 'done'", timeout=120_000)
    # the figures are fetched again once the job is done: the comparison's text alternative then
    page.wait_for_function("document.getElementById('figures').textContent.includes('served cost: TTFT p50')")
    assert page.locator("[data-figure-id=comparison]").count() == 1
    assert "repeats the engine's launches for 40 of 40 requests" in page.text_content("#figures")
    assert "the telemetry of" in page.text_content("#trace-sources")
    page.screenshot(path=str(SHOTS / "replay-job-1280.png"), full_page=True)
    job = BenchmarkJob.objects.get(kind="replay")

    page.goto(f"{base}/recipes/tiny-cpu/live")
    assert f"job {job.pk}" in page.text_content("#replay-latest")
    rows = page.locator("#replay-rows tbody tr td:first-child").all_text_contents()
    assert rows == ["cost", "rule", "served cost"]
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#replay").screenshot(path=str(SHOTS / "replay-live-390.png"))
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the live page scrolls sideways at 390 px ({width} px wide)"
    page.click("#replay-latest a")
    page.wait_for_url(f"**/jobs/{job.pk}")
    page.wait_for_function("document.getElementById('figures').textContent.includes('served cost: TTFT p50')")
    page.screenshot(path=str(SHOTS / "replay-job-390.png"), full_page=True)

    # cited by a decision: the trade-off sets each policy replayed beside what the engine served
    from heliosweb.decisions.services import decision_propose

    from .test_decisions import RATIONALE

    decision = decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE, evidence=[job.pk])
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{base}/decisions/{decision.pk}")
    heads = page.locator("#tradeoff-replay-parts table.replay tbody th").all_text_contents()
    assert heads == ["cost, replayed", "rule, replayed", "cost, as served"]
    assert "40 of 40 requests (100 %)" in page.text_content(
        '#tradeoff-replay-parts table.replay tr[data-policy="cost"]'
    )
    source = page.text_content("#tradeoff-replay-parts .replay-source")
    assert "what every engine served on tiny-cpu from" in source and "(replayed on affine)" in source
    assert "replay: 40 requests" in page.text_content("#tradeoff-requests-parts .requests-summary")
    assert page.locator("#tradeoff-requests-parts table.worst tbody tr a").count() == 20  # each opens /explain
    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(200)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"wider than {width} px"
        page.locator("#tradeoff-replay-parts").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"replay-decision-{width}.png"))
    box = page.locator("#tradeoff-replay-parts .scroll").first
    assert box.evaluate("e => getComputedStyle(e).overflowX") == "auto"  # a wide table scrolls inside its box
