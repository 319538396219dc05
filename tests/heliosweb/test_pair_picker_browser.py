"""The pair picker of a job that finishes while its page is open (issue 29, item 2), in Debian's
Chromium: it appears when the job's `done` arrives, without a reload, and picking the other pair
changes every delta the page shows (the per-request CDF, the result's text). Screenshots of the
page with its picker at 1280 and 390 px land in var/screenshots (job-pair-*.png)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import log_in_and_open, needs_chromium
from .runs import SMALL

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
# The per-request CDF of after - before as drawn (scrolled to, so drawn), and the page's label.
DELTAS = """async () => {
  const el = document.querySelector('[data-figure-id=deltas]');
  el.scrollIntoView();
  while (!el.data) await new Promise(r => setTimeout(r, 50));
  return {title: el.getAttribute('aria-label'), x: el.data[0].x, label: document.getElementById('pair-label').textContent};
}"""


def shoot(page, name: str) -> None:
    """What a reader sees from the picker down and at the per-request deltas: at 1280 px as the
    page stands, then at 390 px as a phone opens it (titles are fitted to the width at load)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 844 if width < 500 else 800})
        if width < 500:
            page.reload()
            page.wait_for_function("document.getElementById('figures').dataset.loaded")
        for at, shot in (("#pair-form", name), ("[data-figure-id=deltas]", f"{name}-deltas")):
            page.evaluate(f"document.querySelector('{at}').scrollIntoView()")
            page.wait_for_timeout(800)  # the figures relaid out for the width
            page.screenshot(path=str(SHOTS / f"{shot}-{width}.png"))


def test_the_picker_appears_when_the_job_ends_live_and_picking_changes_the_delta(stack, page, maintainer, recipe):
    from heliosweb.jobs.services.submission import job_create

    stack.start_web()
    stack.stop_worker()  # the job waits, queued, while its page opens
    job = job_create(kind="simulate", recipe=recipe.name, params=SMALL["simulate"], user=maintainer)
    log_in_and_open(page, f"{stack.base_url}/jobs/{job.pk}", "maint", "pw-maint-123")
    assert page.locator("#pair-form").count() == 0 and page.text_content("#job-status") == "queued"
    stack.start_worker()
    page.wait_for_selector("#pair-form", state="visible", timeout=120_000)
    assert page.text_content("#job-status") == "done" and page.url.endswith(f"/jobs/{job.pk}")  # not reloaded
    page.wait_for_function("document.getElementById('result-text').textContent.includes('rule − cost')")
    default = page.evaluate(DELTAS)
    assert default["label"] == "rule − cost" and default["title"] == "rule − cost per request"
    assert "rule − cost, percentile of per-request differences" in page.text_content("#result-text")
    shoot(page, "job-pair-live")

    page.select_option("#id_after", "cost")
    page.select_option("#id_before", "rule")
    page.click("#pair-form button[type=submit]")
    page.wait_for_url(f"**/jobs/{job.pk}?after=cost&before=rule")
    page.wait_for_function("document.getElementById('result-text').textContent.includes('cost − rule')")
    picked = page.evaluate(DELTAS)
    assert picked["label"] == "cost − rule" and picked["title"] == "cost − rule per request"
    assert any(x != 0 for x in default["x"])  # the traffic tells the two policies apart
    # the same requests, each delta reversed: the largest loss is now the largest gain
    assert (min(picked["x"]), max(picked["x"])) == pytest.approx((-max(default["x"]), -min(default["x"])), abs=1e-6)
    assert picked["x"] != default["x"]
    assert "cost − rule, percentile of per-request differences" in page.text_content("#result-text")
    assert "table=deltas&before=rule&after=cost" in page.get_attribute("#downloads a[href*='table=deltas']", "href")
    shoot(page, "job-pair-picked")
