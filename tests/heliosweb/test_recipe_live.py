"""The live recipe page in Debian's Chromium: frames of posted telemetry appear, an applied decision
draws its marker and fills the before/after panel, and after the server is cut and restored the
page refills what it missed: no hole in the frame numbers."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User

from heliosweb.decisions import services as decisions
from heliosweb.telemetry.ingest import telemetry_ingest
from heliosweb.telemetry.models import TelemetryBatch

from .conftest import log_in_and_open, needs_chromium
from .telemetry_records import body, finished, launch
from .test_dashboard_live import off_the_browser_thread

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]


def post_batch(recipe, n: int, policy: str = "cost", version: int = 1) -> None:
    now = time.time() * 1000
    records = []
    for i in range(20):
        graph = (512, 1024, 2048)[i % 3]
        common = {"t_ms": now - 20 + i, "policy": policy, "version": version}
        records.append(launch(n * 100 + i, graph=graph, end=graph - 10, padded=10, chooser="catalog", ms=3.0, **common))
        records.append(finished(n * 100 + i, prompt_tokens=graph - 10, ttft_ms=5.0 + i, launches=[graph], **common))
    recipe.refresh_from_db()
    telemetry_ingest(recipe=recipe, data=body(records, n))


def test_the_live_page_marks_an_apply_and_has_no_frame_gap_after_a_cut(stack, page, recipe, author, reviewer):
    User.objects.create_user("watcher", password="pw-watcher-123")
    stack.start_web()
    for n in range(1, 4):
        off_the_browser_thread(post_batch, recipe=recipe, n=n)
    log_in_and_open(page, f"{stack.base_url}/recipes/tiny-cpu/live", "watcher", "pw-watcher-123")
    page.wait_for_function("document.getElementById('live').dataset.lastSeq === '3'")
    off_the_browser_thread(post_batch, recipe=recipe, n=4)  # live, through the broadcast
    page.wait_for_function("document.getElementById('live').dataset.lastSeq === '4'")

    decision = off_the_browser_thread(
        decisions.decision_propose, actor=author, recipe="tiny-cpu", policy="rule", rationale="watch it"
    )
    off_the_browser_thread(decisions.decision_approve, actor=reviewer, decision=decision)
    off_the_browser_thread(decisions.decision_apply, actor=author, decision=decision)
    marker = f"v2: rule (decision #{decision.pk})"
    page.wait_for_function(f"document.querySelector('[data-figure-id=fig-chunks]').textContent.includes({marker!r})")
    page.wait_for_function(f"(document.getElementById('panel-label') || {{}}).textContent === {marker!r}")
    assert "too few samples" in page.text_content("#panel-body")

    stack.stop_web()  # the network cut: the socket drops; telemetry keeps arriving meanwhile
    page.wait_for_function("document.getElementById('connection').textContent !== 'live'")
    for n in range(5, 8):
        off_the_browser_thread(post_batch, recipe=recipe, n=n, policy="rule", version=2)
    stack.start_web()
    off_the_browser_thread(post_batch, recipe=recipe, n=8, policy="rule", version=2)
    page.wait_for_function("document.getElementById('live').dataset.lastSeq === '8'", timeout=90_000)
    live = page.eval_on_selector("#live", "el => ({...el.dataset})")
    assert (live["frames"], live["gaps"]) == ("8", "0")
    assert TelemetryBatch.objects.filter(recipe=recipe).count() == 8
    page.screenshot(path=str(stack.logdir / "recipe-live.png"), full_page=True)
