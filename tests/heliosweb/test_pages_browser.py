"""Every page in Debian's Chromium at a desktop (1280 px) and a phone (390 px) width: no horizontal
scroll on the document, every chart no wider than the screen, and axe-core (axe-playwright-python)
reporting no serious or critical violation. With HELIOS_SCREENSHOTS=<folder>, a full-page
screenshot of each page at each width lands there (look at them before calling a layout done)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from heliosweb.traces.services import trace_upload

from .conftest import ROOT, log_in_and_open, needs_chromium
from .runs import SMALL, store

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]

SHOTS = Path(os.environ["HELIOS_SCREENSHOTS"]) if os.environ.get("HELIOS_SCREENSHOTS") else None
WIDTHS = (1280, 390)
# What the document's width exceeds the viewport by, and every drawn chart wider than the screen.
OVERFLOW = """() => ({
  document: document.documentElement.scrollWidth - window.innerWidth,
  charts: Array.from(document.querySelectorAll('.js-plotly-plot'))
    .filter(el => el.getBoundingClientRect().right > window.innerWidth + 1).map(el => el.dataset.figureId || el.id),
})"""


def _pages(recipe, jobs: dict, decision) -> dict[str, str]:
    first, second = store("simulate", recipe=recipe), store("simulate", recipe=recipe)
    rows = (ROOT / "tests" / "data" / "traces" / "azure-llm-2023-code.csv").read_bytes().splitlines()[:400]
    trace_upload(user=None, name="azure-head", content=b"\n".join(rows) + b"\n")  # /traces draws its charts
    return {
        "traces": "/traces",
        "dashboard": "/",
        "jobs": "/jobs/",
        "job-new": "/jobs/new",
        **{f"job-{kind}": f"/jobs/{job.pk}" for kind, job in jobs.items()},
        "compare": f"/compare?ids={first.pk},{second.pk}",
        "explain": "/explain?prompt_tokens=14000&catalog=drift",
        "recipe": f"/recipes/{recipe.name}",
        "recipe-live": f"/recipes/{recipe.name}/live",
        "recipe-new": "/recipes/new",
        "decisions": "/decisions/",
        "decision": f"/decisions/{decision.pk}",
        "decision-new": f"/decisions/new?recipe={recipe.name}",
        "audit": "/audit/",
    }


def _settled(page) -> None:
    """Drawn: the job page's figures fetched, every chart's SVG in place."""
    page.wait_for_load_state("load")
    if page.locator("#job").count():
        page.wait_for_function(
            "document.getElementById('figures').dataset.loaded && !document.getElementById('result').hidden"
        )
    page.wait_for_function(
        "Array.from(document.querySelectorAll('.js-plotly-plot')).every(el => el.querySelector('.main-svg'))"
    )


def test_every_page_fits_a_phone_and_axe_finds_nothing_serious(stack, page, recipe):
    from axe_playwright_python.sync_playwright import Axe

    from heliosweb.decisions.services import decision_propose

    User.objects.create_superuser("tour", password="pw-tour-123")
    author = User.objects.get(username="tour")
    jobs = {kind: store(kind, recipe=recipe) for kind in SMALL}
    decision = decision_propose(
        actor=author, recipe=recipe, policy="rule", rationale="rule wins on drift " * 40, evidence=[jobs["pr22"].pk]
    )
    stack.start_web()
    pages = _pages(recipe, jobs, decision)
    log_in_and_open(page, f"{stack.base_url}/", "tour", "pw-tour-123")
    axe = Axe()
    problems: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844 if width < 500 else 800})
        for name, url in pages.items():
            page.goto(f"{stack.base_url}{url}")
            _settled(page)
            if SHOTS is not None:
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
            overflow = page.evaluate(OVERFLOW)
            if overflow["document"] > 0 or overflow["charts"]:
                problems.append(f"{name} at {width} px: {overflow}")
            found = axe.run(page).response["violations"]
            problems += [
                f"{name} at {width} px: axe {v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:4]}"
                for v in found
                if v["impact"] in ("serious", "critical")
            ]
    assert problems == [], "\n".join(problems)


def test_a_number_typed_as_text_or_cleared_is_refused_at_its_field_in_chromium(stack, page, maintainer):
    """What a person types reaches the server ("ten", not the "" a number input would post) and
    comes back refused under its field, marked for assistive technology; nothing runs."""
    from heliosweb.jobs.models import BenchmarkJob

    stack.start_web()
    log_in_and_open(page, f"{stack.base_url}/jobs/new?kind=sweep", "maint", "pw-maint-123")
    for typed, says in (
        ("ten", "must be an integer in decimal digits, got 'ten'"),
        ("", "must not be empty (its default is 256)"),
    ):
        page.fill("[name='sweep.count']", typed)
        page.click("#start-job")
        page.wait_for_selector("[data-field='sweep.count']")
        field = page.locator("[name='sweep.count']")
        assert field.input_value() == typed and field.get_attribute("aria-invalid") == "true"
        message = page.locator("#" + field.get_attribute("aria-describedby").replace(".", "\\."))
        assert says in message.text_content()
    assert BenchmarkJob.objects.count() == 0


def test_a_jobs_downloads_appear_when_it_ends_without_a_reload(stack, page, maintainer, recipe):
    from heliosweb.jobs.services.submission import job_create

    stack.start_web()
    stack.stop_worker()  # the job waits, queued, while its page opens
    job = job_create(kind="pr22", recipe=recipe.name, params={}, user=maintainer)
    log_in_and_open(page, f"{stack.base_url}/jobs/{job.pk}", "maint", "pw-maint-123")
    assert page.locator("#downloads").is_hidden() and page.text_content("#job-status") == "queued"
    stack.start_worker()
    page.wait_for_selector("#downloads a[href$='?table=arms']", state="visible", timeout=120_000)
    assert page.text_content("#job-status") == "done"
    assert page.locator("#downloads a", has_text="Chrome trace").count() == 1
