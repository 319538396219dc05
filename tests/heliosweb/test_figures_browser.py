"""Every kind's job page in Debian's Chromium: no console or page error, and each figure the API
lists drawn with its traces and points (read from the plot element's own data); a live pulse job's
figure grows and, after a reload, shows the same points; the explain page agrees with the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from heliosweb.figures.simulate import REQUEST_ROWS
from heliosweb.jobs.models import BenchmarkJob

from .conftest import ROOT, log_in_and_open, needs_chromium
from .runs import SMALL, store

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]

SHOTS = Path(os.environ.get("HELIOS_SCREENSHOTS", "")) if os.environ.get("HELIOS_SCREENSHOTS") else None
DRAWN = """el => el.data.map(t => ({name: t.name || null, points: (t.x || t.y || []).length}))"""


def _watch_errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return errors


def _shot(page, name: str) -> None:
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _expected(page, url: str) -> list[dict]:
    return page.request.get(url).json()


def test_every_kinds_finished_job_page_draws_each_listed_figure_without_errors(stack, page):
    User.objects.create_user("viewer-b", password="pw-viewer-123")
    stack.start_web()
    jobs = {kind: store(kind) for kind in SMALL}
    errors = _watch_errors(page)
    log_in_and_open(page, f"{stack.base_url}/jobs/{jobs['pr22'].pk}", "viewer-b", "pw-viewer-123")
    for kind, job in jobs.items():
        page.goto(f"{stack.base_url}/jobs/{job.pk}")
        page.wait_for_function("document.getElementById('figures').dataset.loaded")
        listed = _expected(page, f"{stack.base_url}/api/jobs/{job.pk}/figures/")
        assert listed, kind
        for entry in listed:
            selector = f"#figures [data-figure-id='{entry['id']}']"
            page.locator(selector).scroll_into_view_if_needed()  # a figure is drawn as it comes near
            page.wait_for_selector(selector + " .main-svg")
            drawn = page.eval_on_selector(selector, DRAWN)
            want = [
                {"name": t.get("name"), "points": len(t.get("x") or t.get("y") or [])} for t in entry["figure"]["data"]
            ]
            assert drawn == want, (kind, entry["id"])
            assert page.eval_on_selector(selector, "el => el._fullData.length") == len(want)
        assert sum(len(t.get("x") or t.get("y") or []) for e in listed for t in e["figure"]["data"]) > 0, kind
        _shot(page, f"job-{kind}")
    assert errors == [], errors


def test_a_live_pulse_figure_grows_and_shows_the_same_points_after_a_reload(stack, page):
    from heliosweb.jobs.services.submission import job_create

    user = User.objects.create_user("viewer-c", password="pw-viewer-123")
    stack.start_web()
    errors = _watch_errors(page)
    log_in_and_open(page, f"{stack.base_url}/explain", "viewer-c", "pw-viewer-123")
    job = job_create(kind="pulse", params={"count": 400, "rate": 25}, user=user)
    page.goto(f"{stack.base_url}/jobs/{job.pk}")
    points = "document.querySelector('[data-figure-id=events]').data[0].x.length"
    page.wait_for_function(f"document.getElementById('figures').dataset.loaded && {points} > 0")
    first = page.evaluate(points)
    page.wait_for_function(f"{points} >= {first + 40}")
    assert page.text_content("#job-status") == "running", "the figure grew while the job ran"
    page.wait_for_function("document.getElementById('job-status').textContent === 'done'", timeout=120_000)
    page.wait_for_function(f"{points} === 400")
    grown = page.eval_on_selector(
        "[data-figure-id=events]", "el => [Array.from(el.data[0].x), Array.from(el.data[0].y)]"
    )
    _shot(page, "job-pulse-live")
    page.reload()
    page.wait_for_function("document.getElementById('figures').dataset.loaded")
    reloaded = page.eval_on_selector(
        "[data-figure-id=events]", "el => [Array.from(el.data[0].x), Array.from(el.data[0].y)]"
    )
    assert reloaded == grown and grown[0] == list(range(400))
    assert BenchmarkJob.objects.get(pk=job.pk).status == "done"
    assert errors == [], errors


def test_explain_shows_the_clis_plans_for_the_pull_requests_arm(stack, page):
    User.objects.create_user("viewer-d", password="pw-viewer-123")
    stack.start_web()
    errors = _watch_errors(page)
    log_in_and_open(page, f"{stack.base_url}/explain", "viewer-d", "pw-viewer-123")
    page.fill("input[name=prompt_tokens]", "14000")
    page.select_option("select[name=catalog]", "drift")
    page.click("#explain-form button[type=submit]")
    page.wait_for_selector("#figures [data-figure-id=plans] .main-svg")
    question = json.loads(page.text_content("#plan-input"))
    cli = subprocess.run(
        [sys.executable, "-m", "scheduler_core", "plan"],
        input=json.dumps(question),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    plans = json.loads(cli.stdout)["plans"]
    rows = page.eval_on_selector_all(
        "#plans tbody tr", "trs => trs.map(tr => Array.from(tr.children).map(td => td.textContent))"
    )
    assert [[r[0], int(r[1]), int(r[3]), f"{float(r[4]):.3f}"] for r in rows] == [
        [p["policy"], p["launch_count"], p["padded_tokens"], f"{p['ttft_ms']:.3f}"] for p in plans
    ]
    bars = page.eval_on_selector(
        "[data-figure-id=plans]",
        "el => el.data.filter(t => t.name.startsWith('graph ')).reduce((n, t) => n + t.x.length, 0)",
    )
    assert bars == sum(p["launch_count"] for p in plans)
    _shot(page, "explain")
    assert errors == [], errors
    response = page.goto(f"{stack.base_url}/explain?prompt_tokens=14000&atomic_spans=10-9000")
    assert response.status == 400 and "request.atomic_spans" in page.text_content(".error")
    _shot(page, "explain-error")


ROW_CENTRES = """el => el.data.map(t => { const c = [];
  for (let i = 0; i + 2 < t.y.length; i += 5) c.push((t.y[i] + t.y[i + 2]) / 2); return c; })"""
SCATTER_PATHS = """el => ({ fills: el.querySelectorAll('.scatterlayer path.js-fill').length,
  lines: el.querySelectorAll('.scatterlayer path.js-line').length })"""


def test_the_simulate_requests_timeline_shows_every_request_up_to_its_cap(stack, page):
    """Read back from the drawn plot: a row (both parts) for every request of each policy, and
    past REQUEST_ROWS one in every few by arrival across the whole run, the title saying so."""
    User.objects.create_user("viewer-r", password="pw-viewer-123")
    stack.start_web()
    few = store("simulate")
    many = store(
        "simulate",
        raw={"requests": REQUEST_ROWS + 1, "prompt_max": 600, "output_min": 1, "output_max": 2, "launch_events": 1},
    )
    errors = _watch_errors(page)
    log_in_and_open(page, f"{stack.base_url}/jobs/{few.pk}", "viewer-r", "pw-viewer-123")
    for job in (few, many):
        page.goto(f"{stack.base_url}/jobs/{job.pk}")
        page.wait_for_function("document.getElementById('figures').dataset.loaded")
        for policy in job.result["policies"]:
            requests = sorted(policy["per_request"], key=lambda r: r["arrival_ms"])
            step = -(-len(requests) // REQUEST_ROWS)  # the fewest in every one that keeps REQUEST_ROWS
            shown = requests[::step]
            assert len(shown) <= REQUEST_ROWS and shown[-1] in requests[-step:]  # the run's end is drawn
            selector = f"#figures [data-figure-id='requests-{policy['policy']}']"
            page.locator(selector).scroll_into_view_if_needed()  # drawn as it comes near
            page.wait_for_selector(selector + " .main-svg")
            rows = page.eval_on_selector(selector, ROW_CENTRES)  # a rectangle (five points) per request and part
            assert rows == [[pytest.approx(r["id"]) for r in shown]] * 2, (job.pk, policy["policy"])
            paths = page.eval_on_selector(selector, SCATTER_PATHS)
            assert paths == {"fills": 2, "lines": 0}, paths  # each part one SVG path, whatever the rows
            title = page.eval_on_selector(selector, "el => el.layout.title.text")
            if len(requests) > REQUEST_ROWS:
                assert f"one in {step} of {len(requests)} by arrival ({len(shown)} rows)" in title, title
            else:
                assert f"all {len(requests)} requests" in title, title
    assert errors == [], errors


def test_compare_overlays_two_jobs_of_a_kind(stack, page):
    User.objects.create_user("viewer-e", password="pw-viewer-123")
    stack.start_web()
    a, b = store("simulate"), store("simulate")
    errors = _watch_errors(page)
    log_in_and_open(page, f"{stack.base_url}/compare?ids={a.pk},{b.pk}", "viewer-e", "pw-viewer-123")
    page.wait_for_selector("[data-figure-id=simulate-ttft-cdf] .main-svg")
    names = page.eval_on_selector("[data-figure-id=simulate-ttft-cdf]", "el => el.data.map(t => t.name)")
    assert names == [f"#{a.pk} cost", f"#{a.pk} rule", f"#{b.pk} cost", f"#{b.pk} rule"]
    _shot(page, "compare")
    assert errors == [], errors


def test_on_a_phone_a_compare_overlays_long_legend_stays_below_its_axis_title(stack, page):
    """At 390 px the legend goes below the plot, in the room `fitted` keeps for it: the requests
    timeline's four long names ("#1 arrival to first token") take a row each, and drew over the x
    axis's tick labels when counted as two rows of 130 px items."""
    User.objects.create_user("viewer-p", password="pw-viewer-123")
    stack.start_web()
    a, b = store("simulate"), store("simulate")
    page.set_viewport_size({"width": 390, "height": 844})
    log_in_and_open(page, f"{stack.base_url}/compare?ids={a.pk},{b.pk}", "viewer-p", "pw-viewer-123")
    selector = "[data-figure-id=simulate-requests-cost]"
    page.wait_for_selector(selector + " .main-svg")
    legend_top, axis_bottom = page.eval_on_selector(selector, LEGEND_AND_X_AXIS)
    assert legend_top >= axis_bottom, (legend_top, axis_bottom)


LEGEND_AND_X_AXIS = """el => [el.querySelector('.legend').getBoundingClientRect().top,
  Math.max(...Array.from(el.querySelectorAll('.xtick text, .g-xtitle text'), (t) => t.getBoundingClientRect().bottom))]"""


def test_a_finished_jobs_result_json_is_written_when_its_details_open(stack, page):
    """The result's indented JSON (11 MB for a 19,500-request simulate) is not written while the
    page loads, only when the reader opens it; then it is the stored result."""
    User.objects.create_user("viewer-j", password="pw-viewer-123")
    stack.start_web()
    job = store("simulate")
    log_in_and_open(page, f"{stack.base_url}/jobs/{job.pk}", "viewer-j", "pw-viewer-123")
    page.wait_for_selector("#result:not([hidden])")
    assert page.text_content("#result-text").strip()  # the summary is shown at once
    assert page.text_content("#result-json") == ""
    page.click("#result details summary")
    page.wait_for_function("document.getElementById('result-json').textContent.length > 0")
    assert json.loads(page.text_content("#result-json")) == job.result
