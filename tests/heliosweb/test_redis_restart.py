"""Redis restarts mid-job: the worker and the web process reconnect, and the job page's websocket
reconnects by itself and catches up from the stored events, missing nothing.

The test runs its own bundled Redis (never the machine's, which other work may use), stops it
while a job streams, and starts it again on the same port and data directory."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission, User
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from heliosweb.devtool import start_redis
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.jobs.services import submission

from .conftest import Stack, _database_url, log_in_and_open, needs_chromium, use_redis, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]


def test_a_job_page_survives_a_redis_restart_and_shows_every_event(tmp_path: Path, settings, page):
    from django.db import connection

    redis_dir = tmp_path / "redis"
    redis, url = start_redis(redis_dir)
    stack = Stack(url, _database_url(connection.settings_dict), tmp_path)
    # Pings (and the catch-up from the database each one brings) every 5 s, not 20: a stream whose
    # live path the restart broke is whole again well within the wait below.
    stack.env["HELIOS_WS_PING_SECONDS"] = "5"
    try:
        use_redis(url, settings)
        stack.start_worker()
        stack.start_web()
        group, _ = Group.objects.get_or_create(name="maintainers")
        group.permissions.add(Permission.objects.get(codename="run_jobs"))
        user = User.objects.create_user("restart-maint", password="pw-restart-123")
        user.groups.add(group)

        # ~10 s of events, about 200 in all: the page lists up to 300, so every one must show.
        job = submission.job_create(kind="pulse", params={"count": 100, "rate": 10.0}, user=user)
        log_in_and_open(page, f"{stack.base_url}/jobs/{job.pk}", "restart-maint", "pw-restart-123")
        page.wait_for_function("Number(document.getElementById('event-count').textContent) >= 20")

        port = int(url.rsplit(":", 1)[1].split("/")[0])
        redis.send_signal(signal.SIGTERM)
        redis.wait(timeout=10)
        time.sleep(2)  # an outage the worker, the web process and the page all notice
        redis, _ = start_redis(redis_dir, port)

        wait_until(
            lambda: BenchmarkJob.objects.get(pk=job.pk).status != JobStatus.RUNNING,
            timeout=90,
            what="the job to finish after the restart",
        )
        job.refresh_from_db()
        assert job.status == JobStatus.DONE, (job.error, stack.worker_log()[-3000:])
        stored = job.events.count()
        assert list(job.events.order_by("seq").values_list("seq", flat=True)) == list(range(1, stored + 1))
        try:
            page.wait_for_function(
                f"document.getElementById('event-count').textContent === '{stored}'"
                " && document.getElementById('job-status').textContent === 'done'"
            )
        except PlaywrightTimeout:
            state = {k: page.text_content(f"#{k}") for k in ("event-count", "job-status", "connection")}
            web_log = (tmp_path / "web.log").read_text()[-4000:]
            raise AssertionError(f"the page shows {state}, {stored} events stored; web log:\n{web_log}") from None
        shown = page.eval_on_selector_all("#events li", "lis => lis.map(li => li.value)")
        assert shown == list(range(1, stored + 1))  # every event once, in order, none lost in the outage
    finally:
        stack.close()
        redis.terminate()
        redis.wait(timeout=10)
