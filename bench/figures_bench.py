"""Figures benchmarks (prints figures next to their targets; not a test).

1. `POST /api/plan/` for a 131,072-token prompt, both policies, the pull request's clean catalog:
   server time through Django's test client (the whole request path, middleware and DRF
   included). Target: p95 <= 50 ms.
2. The page of a finished `simulate` job with 1,000 requests (launch events: 1,000 per policy):
   server time of the page and of `GET /api/jobs/<id>/figures/` (built: the figure cache emptied
   first; kept: read again from it), and the figures' payload.
   Targets: <= 1 s, <= 2 MB. (The lanes timeline draws at most 200 launches per policy; the
   distributions are a CDF over requests and a 101-point ITL CDF.)
3. A live `pulse` job at 500 events/s on a real worker, its page open in Debian's Chromium: the
   events figure grows (points counted) and the browser's long tasks (PerformanceObserver
   'longtask') are recorded. Target: no long task over 200 ms.

Run: .venv/bin/python bench/figures_bench.py [--samples 40] [--events 5000] [--rate 500] [--only plan|simulate|live ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from web_bench import ARGS, CHROMIUM, log_in, percentile, set_up, start_servers, stop


def plan(args: argparse.Namespace, client: Any) -> None:
    from scheduler_core.analyses.catalogs import pr22_catalogs
    from scheduler_core.execution import AffineExecution

    execution = AffineExecution()
    body = {
        "policies": ["cost", "rule"],
        "catalog": pr22_catalogs(execution, 1.6)["clean"].to_dicts(),
        "request": {"prompt_tokens": 131072},
        "execution": execution.to_dict(),
    }
    times = []
    for _ in range(args.samples + 3):
        t0 = time.perf_counter()
        response = client.post("/api/plan/", body, content_type="application/json")
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.content
    times = times[3:]  # warm-up: URL resolver, first imports
    launches = [p["launch_count"] for p in response.json()["plans"]]
    print(
        f"plan: 131,072 tokens, cost and rule ({launches[0]} and {launches[1]} launches), {args.samples} requests; "
        f"server time p50 {statistics.median(times):.1f} ms, p95 {percentile(times, 95):.1f} ms (target p95 <= 50 ms)"
    )


def simulate_page(client: Any, user: Any) -> None:
    from heliosweb.jobs.models import BenchmarkJob, JobEvent
    from heliosweb.jobs.registry import get_kind

    analysis = get_kind("simulate").analysis
    params = analysis.validate({"requests": 1000, "launch_events": 1000})
    events: list[dict[str, Any]] = []
    result = analysis.run(params, events.append)
    job = BenchmarkJob.objects.create(
        kind="simulate", queue="sim", params=params, result=result, status="done", created_by=user, last_seq=len(events)
    )
    JobEvent.objects.bulk_create(
        JobEvent(job=job, seq=i + 1, type=e["type"], data={k: v for k, v in e.items() if k != "type"})
        for i, e in enumerate(events)
    )
    from django.core.cache import caches

    from heliosweb.figures.figure_cache import ALIAS
    from heliosweb.figures.selectors import job_figures_json

    kept = caches[ALIAS]  # a finished job's figures are built once (figure_cache): time both paths
    client.get(f"/jobs/{job.pk}")  # warm-up
    client.get(f"/api/jobs/{job.pk}/figures/")
    page, figures, cached, size = [], [], [], 0
    for _ in range(5):
        t0 = time.perf_counter()
        assert client.get(f"/jobs/{job.pk}").status_code == 200
        page.append((time.perf_counter() - t0) * 1000)
        kept.clear()
        t0 = time.perf_counter()
        response = client.get(f"/api/jobs/{job.pk}/figures/")
        figures.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        assert client.get(f"/api/jobs/{job.pk}/figures/").content == response.content
        cached.append((time.perf_counter() - t0) * 1000)
        size = len(response.content)
    listed = json.loads(response.content)

    build = []
    for _ in range(5):
        kept.clear()
        t0 = time.perf_counter()
        job_figures_json(job_id=job.pk)
        build.append((time.perf_counter() - t0) * 1000)
    print(
        f"simulate page: 1,000 requests, {len(events)} stored events, {len(listed)} figures; server time: page "
        f"median {statistics.median(page):.0f} ms, figures built median {statistics.median(figures):.0f} ms, "
        f"together {statistics.median(page) + statistics.median(figures):.0f} ms (target <= 1000 ms), of which "
        f"reading the events and building the figures' JSON median {statistics.median(build):.0f} ms; "
        f"figures kept (read again) median {statistics.median(cached):.1f} ms; "
        f"figures payload {size / 1e6:.2f} MB (target <= 2 MB)"
    )


def live(args: argparse.Namespace, tmp: Path, procs: list, user: Any) -> None:
    if not os.path.exists(CHROMIUM):
        print("live: skipped (needs /usr/bin/chromium: apt-get install -y chromium)")
        return
    from playwright.sync_api import sync_playwright

    from heliosweb.jobs.services.submission import job_create

    base = start_servers(tmp, procs)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(bypass_csp=True)  # wait_for_function evaluates with eval; the site forbids it
        page.add_init_script(
            """window.longTasks = [];
            new PerformanceObserver((list) => { for (const e of list.getEntries()) window.longTasks.push(e.duration); })
              .observe({ entryTypes: ["longtask"] });"""
        )
        log_in(page, base)
        with ThreadPoolExecutor(1) as pool:  # off Playwright's event-loop thread (see web_bench)
            job = pool.submit(
                job_create, kind="pulse", params={"count": args.events, "rate": args.rate}, user=user
            ).result()
        page.goto(f"{base}/jobs/{job.pk}")
        points = "(document.querySelector('[data-figure-id=events]')?.data?.[0]?.x?.length || 0)"
        page.wait_for_function(f"{points} > 0", timeout=60_000)
        grew = [page.evaluate(points)]
        loading = page.evaluate("window.longTasks.splice(0)")  # page load (parsing Plotly.js) apart from growth
        page.wait_for_function(
            "document.getElementById('job-status').textContent === 'done'",
            timeout=(args.events / args.rate + 120) * 1000,
        )
        page.wait_for_function(f"{points} === {args.events}", timeout=30_000)
        grew.append(page.evaluate(points))
        long_tasks = page.evaluate("window.longTasks")
        stored = job.events.count()
        page.wait_for_function(f"document.getElementById('event-count').textContent === '{stored}'", timeout=10_000)
        browser.close()
    print(
        f"live: pulse of {args.events} events at {args.rate:.0f}/s; figure points {grew[0]} when first seen -> "
        f"{grew[1]} at the end, the page's event count equal to the {stored} stored; browser long tasks while it grew: {len(long_tasks)}, longest "
        f"{max(long_tasks, default=0):.0f} ms (target: none over 200 ms); during the page load: "
        f"{len(loading)}, longest {max(loading, default=0):.0f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--only", choices=("plan", "simulate", "live"), action="append", help="run only these parts")
    args = parser.parse_args()
    parts = set(args.only or ("plan", "simulate", "live"))
    tmp, procs, user = set_up()
    try:
        from django.test import Client

        client = Client()
        client.force_login(user)
        if "plan" in parts:
            plan(args, client)
        if "simulate" in parts:
            simulate_page(client, user)
        if "live" in parts:
            live(args, tmp, procs, user)
    finally:
        stop(procs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
