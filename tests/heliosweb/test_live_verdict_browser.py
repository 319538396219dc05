"""The live page keeps its own verdict straight (issue 21, point 4), in Debian's Chromium: an empty
chart spans the last minutes and says it is empty (not Plotly's year 2000), the header names the
simulated engine that runs now, not the one that ran when the page loaded, and TTFT points before a
policy change's marker stay as they were however long the page stays open."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from heliosweb.decisions import services as decisions
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.simengine.services import engine_start, engine_stop
from heliosweb.telemetry.ingest import telemetry_ingest

from .conftest import log_in_and_open, needs_chromium, wait_until
from .telemetry_records import body, finished, launch
from .test_dashboard_live import off_the_browser_thread

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]
FIGURES = ("fig-chunks", "fig-ttft", "fig-itl", "fig-rate", "fig-padding")
# Each figure's x range in ms, its tick labels, and its empty-state note (null once it has data).
X_AXES = """ids => ids.map(id => {
  const el = document.querySelector(`[data-figure-id=${id}]`), range = el._fullLayout.xaxis.range.map(r => new Date(r).getTime());
  const note = (el._fullLayout.annotations || []).find(a => a.name === 'empty');
  return {id, range, ticks: [...el.querySelectorAll('.xtick text')].map(t => t.textContent), note: note ? note.text : null};
})"""
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
BEFORE_MARKER = """() => { const el = document.querySelector('[data-figure-id=fig-ttft]'), at = el.layout.shapes[0].x0;
  return el.data[0].x.filter(x => x < at).length; }"""


def shoot(page, name, width):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": width, "height": 844 if width < 500 else 800})
    page.reload()  # as a phone opens it (titles are fitted to the width at load)
    page.wait_for_function("document.getElementById('connection').textContent === 'live'")
    page.wait_for_timeout(2500)  # a redraw
    page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)


def test_an_empty_page_spans_the_last_minutes_and_the_header_follows_the_engine(stack, page, recipe, maintainer):
    User.objects.create_user("watcher", password="pw-watcher-123")
    stack.start_web()
    stack.start_engine_worker()
    log_in_and_open(page, f"{stack.base_url}/recipes/tiny-cpu/live", "watcher", "pw-watcher-123")
    page.set_default_timeout(60_000)
    page.wait_for_function("document.getElementById('connection').textContent === 'live'")
    now = time.time() * 1000
    for fig in page.evaluate(X_AXES, list(FIGURES)):
        assert now - 6 * 60_000 < fig["range"][0] < fig["range"][1] < now + 60_000, fig  # not January 2000
        assert fig["note"] and "reported yet" in fig["note"] and not any("2000" in t for t in fig["ticks"]), fig
    assert page.text_content("#live-engine").startswith("no simulated engine runs")
    shoot(page, "live-empty", 1280)
    shoot(page, "live-empty", 390)

    job = off_the_browser_thread(engine_start, recipe=recipe, user=maintainer, params={"rate_per_s": 5.0})
    page.wait_for_function(f"document.getElementById('live-engine').textContent === 'simulated engine: job {job.pk}'")
    assert page.get_attribute("#live-engine a", "href") == f"/jobs/{job.pk}"
    page.wait_for_function(  # its telemetry drawn, the empty-state note gone
        f"({X_AXES})(['fig-chunks', 'fig-rate']).every(f => f.note === null)"
    )
    off_the_browser_thread(engine_stop, recipe=recipe)
    wait_until(lambda: BenchmarkJob.objects.get(pk=job.pk).status == "cancelled", timeout=30, what="the engine to stop")
    page.wait_for_function("document.getElementById('live-engine').textContent.startsWith('no simulated engine runs')")


def post_seconds(recipe, batch: int, first_second_ms: float, seconds: int, per_second: int = 60, version: int = 1):
    """`seconds` whole seconds of finished requests, `per_second` each, as one engine batch."""
    policy = "cost" if version == 1 else "rule"
    records = []
    for k in range(seconds * per_second):
        t = first_second_ms + (k // per_second) * 1000 + (k % per_second) * (1000 / per_second)
        common = {"t_ms": t, "policy": policy, "version": version}
        records.append(launch(batch * 1000 + k, graph=512, end=500, padded=12, chooser="catalog", ms=3.0, **common))
        records.append(finished(batch * 1000 + k, prompt_tokens=500, ttft_ms=5.0 + k % 40, launches=[512], **common))
    recipe.refresh_from_db()
    telemetry_ingest(recipe=recipe, data=body(records, batch))


def test_ttft_points_before_a_marker_stay_while_the_page_stays_open(stack, page, recipe, author, reviewer):
    User.objects.create_user("watcher", password="pw-watcher-123")
    stack.start_web()
    start = (int(time.time()) - 120) * 1000.0  # two minutes ago, on a whole second
    for batch in range(1, 5):  # 20 seconds at 60 requests a second: 1,200 TTFT points, past any cap
        off_the_browser_thread(
            post_seconds, recipe=recipe, batch=batch, first_second_ms=start + (batch - 1) * 5000, seconds=5
        )
    log_in_and_open(page, f"{stack.base_url}/recipes/tiny-cpu/live", "watcher", "pw-watcher-123")
    page.set_default_timeout(60_000)
    page.wait_for_function("document.getElementById('live').dataset.lastSeq === '4'")
    decision = off_the_browser_thread(
        decisions.decision_propose, actor=author, recipe="tiny-cpu", policy="rule", rationale="watch the verdict"
    )
    off_the_browser_thread(decisions.decision_approve, actor=reviewer, decision=decision)
    off_the_browser_thread(decisions.decision_apply, actor=author, decision=decision)
    page.wait_for_function("(document.querySelector('[data-figure-id=fig-ttft]').layout.shapes || []).length === 1")
    page.wait_for_timeout(1500)  # a redraw with the marker
    # every one of the 20 seconds drawn as its fastest, median and slowest
    assert page.evaluate(BEFORE_MARKER) == 20 * 3
    after = (int(time.time()) + 1) * 1000.0
    for batch in range(5, 10):  # telemetry keeps coming after the change: a redraw a second
        off_the_browser_thread(post_seconds, recipe=recipe, batch=batch, first_second_ms=after, seconds=1, version=2)
        page.wait_for_function(f"document.getElementById('live').dataset.lastSeq === '{batch}'")
        page.wait_for_timeout(1200)
        assert page.evaluate(BEFORE_MARKER) == 20 * 3, f"after batch {batch}"
    shoot(page, "live-marker", 1280)
    shoot(page, "live-marker", 390)
