"""The pages that say what a serving number is, in Debian's Chromium at 1280 and 390 px: an
overloaded simulate's and a searched capacity's job pages (and its pair picker, a pair picked), /explain in a request's run, the live
page's before/after caveat. Each fits the screen, shows what it must say, and (with
HELIOS_SCREENSHOTS=<folder>) lands as a full-page screenshot to look at."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from heliosweb.decisions.tradeoff import explain_url
from heliosweb.recipes.services import policy_set

from .conftest import log_in_and_open, needs_chromium
from .runs import store
from .test_pages_browser import OVERFLOW, WIDTHS, _settled

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]

SHOTS = Path(os.environ["HELIOS_SCREENSHOTS"]) if os.environ.get("HELIOS_SCREENSHOTS") else None
OVERLOADED = {"requests": 200, "rate_per_s": 40.0, "prompt_max": 8000, "launch_events": 40}
CAPACITY = {"requests": 120, "rate_min_per_s": 2.0, "rate_max_per_s": 60.0, "steps": 3, "repeats": 2}


def test_serving_pages_say_what_their_numbers_are_at_a_desktop_and_a_phone_width(stack, page, recipe):
    User.objects.create_superuser("tour", password="pw-tour-123")
    simulated = store("simulate", recipe=recipe, raw=OVERLOADED)
    capacity = store("capacity", recipe=recipe, raw=CAPACITY)
    worst = simulated.result["deltas"]["worst"][0]
    policy_set(recipe=recipe, policy="rule")  # a change: the live panel compares before and after it
    pages = {
        "simulate-overloaded": (f"/jobs/{simulated.pk}", "#job-overloaded"),
        "capacity-searched": (f"/jobs/{capacity.pk}", "#job-overloaded"),
        "capacity-pair-picked": (f"/jobs/{capacity.pk}?before=rule&after=cost", "#pair-form"),  # cost − rule
        "explain-in-run": (
            explain_url(job=simulated.pk, catalog="clean", prompt_tokens=worst["prompt_tokens"], request=worst["id"]),
            "#in-run-parts",
        ),
        "recipe-live": (f"/recipes/{recipe.name}/live", "#panel-traffic"),
    }
    stack.start_web()
    log_in_and_open(page, f"{stack.base_url}/", "tour", "pw-tour-123")
    problems: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844 if width < 500 else 800})
        for name, (url, must_show) in pages.items():
            page.goto(f"{stack.base_url}{url}")
            _settled(page)
            page.wait_for_selector(must_show)
            if SHOTS is not None:
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
                page.screenshot(path=str(SHOTS / f"{name}-{width}-top.png"))  # the first screen, as a reader sees it
                page.locator(must_show).screenshot(path=str(SHOTS / f"{name}-{width}-what-it-says.png"))
            if not page.locator(must_show).is_visible():
                problems.append(f"{name} at {width} px: {must_show} not shown")
            overflow = page.evaluate(OVERFLOW)
            if overflow["document"] > 0 or overflow["charts"]:
                problems.append(f"{name} at {width} px: {overflow}")
    assert problems == [], "\n".join(problems)
