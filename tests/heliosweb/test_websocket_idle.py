"""Websockets stay open while nothing happens: the dashboard in Debian's Chromium on the real
stack (daphne, Redis channel layer) for 60 quiet seconds. Before, the server closed every idle
socket with 1011 after 5-6 s (redis-py's socket timeout equal to the channel layer's blocking
pop), and the page reconnected. The same page, and a finished job's page with its figures, run
under the site's Content-Security-Policy without a violation."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from heliosweb.jobs.models import BenchmarkJob
from heliosweb.jobs.services.submission import job_create

from .conftest import log_in_and_open, needs_chromium, wait_until
from .test_dashboard_live import off_the_browser_thread

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]

IDLE_SECONDS = 60


def test_the_dashboards_websockets_stay_open_through_a_quiet_minute_answering_pings(stack, page, recipe):
    viewer = User.objects.create_user("idle-viewer", password="pw-idle-123")
    stack.start_web()
    job = off_the_browser_thread(job_create, kind="pr22", user=viewer)
    page = page.context.browser.new_page()  # this one under the site's Content-Security-Policy
    console = []
    page.on("console", lambda message: console.append(message.text))
    sockets = []
    frames: dict[str, list[tuple[str, str]]] = {}

    def record(ws):
        sockets.append(ws)
        frames[ws.url] = []
        ws.on("framereceived", lambda payload: frames[ws.url].append(("in", payload)))
        ws.on("framesent", lambda payload: frames[ws.url].append(("out", payload)))

    page.on("websocket", record)
    log_in_and_open(page, f"{stack.base_url}/", "idle-viewer", "pw-idle-123")
    expect(page.locator("#recipes-live")).to_have_text("live")

    web_log = stack.logdir / "web.log"
    logged_before = web_log.stat().st_size

    page.wait_for_timeout(IDLE_SECONDS * 1000)

    assert sorted(ws.url.rsplit("/ws/", 1)[1] for ws in sockets) == ["jobs/", "recipes/"], "a socket reconnected"
    assert not any(ws.is_closed() for ws in sockets)
    assert page.text_content("#recipes-live") == "live"
    for url, seen in frames.items():
        pings = [p for d, p in seen if d == "in" and '"ping"' in p]
        pongs = [p for d, p in seen if d == "out" and '"pong"' in p]
        assert len(pings) >= 2 and len(pongs) == len(pings), (url, seen)
    wait_until(lambda: BenchmarkJob.objects.get(pk=job.pk).status == "done", what="the pr22 job")
    page.goto(f"{stack.base_url}/jobs/{job.pk}")
    expect(page.locator("#figures .js-plotly-plot").first).to_be_visible()
    assert not [m for m in console if "Content Security Policy" in m], console
    logged = web_log.read_text()[logged_before:]
    assert "Timeout reading" not in logged and "Traceback" not in logged, logged[-3000:]
