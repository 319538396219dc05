"""The decision walk in Chromium at 1280 and 390 px, on an A100 recipe (created through its form,
declaring its hardware) whose proposer cites A100
and H100 evidence: the page opens with the status, what it needs next and the reader's action,
then the verdict read from the A100 jobs only (the H100 ones named as not the recipe's); a second
user's refused steps put the error where the reader is, focused; the second user cites one more
job, an overloaded A100 run, shown as added by him and named by the verdict with the rate it
sustained, its delta read as queueing; approve, then apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from heliosweb.decisions.models import PolicyDecision
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.recipes.models import Recipe
from heliosweb.recipes.services import recipe_update
from scheduler_core.analyses import ANALYSES

from .conftest import log_in_and_open, needs_chromium

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
WIDTHS = ((1280, 900), (390, 844))
RATES = {"rate_min_per_s": 0.5, "rate_max_per_s": 4.0, "steps": 3}
FOCUSED_IN_VIEW = """() => {
  const el = document.activeElement, box = el.getBoundingClientRect();
  return {tag: el.tagName, name: el.name || null, id: el.id, step: el.closest('form')?.dataset.step || null,
          visible: box.top >= 0 && box.bottom <= window.innerHeight};
}"""


def _done(recipe: Any, kind: str, **params: Any) -> BenchmarkJob:
    """Evidence computed in this process exactly as the worker would."""
    analysis = ANALYSES[kind]
    clean = analysis.validate(params)
    result = analysis.run(clean, lambda e: None)
    return BenchmarkJob.objects.create(
        kind=kind, queue="sim", recipe=recipe, params=clean, status="done", result=result
    )


def _person(name: str, *roles: str) -> None:
    user = User.objects.create_user(name, password=f"pw-{name}-123")
    user.groups.add(*Group.objects.filter(name__in=roles))


def _as(browser: Any, base: str, url: str, name: str, width: int, height: int, errors: list[str]) -> Any:
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    page.set_default_timeout(60_000)
    page.on("console", lambda m: _console(errors, name, m))
    log_in_and_open(page, f"{base}{url}", name, f"pw-{name}-123")
    return page


def _console(errors: list[str], name: str, message: Any) -> None:
    """Errors on the pages; a refused step's own answer (its 4xx page, the one that shows the error
    at its form) is the product working, not one."""
    url = message.location.get("url", "")
    refused = "/decisions/" in url and url.rstrip("/").rsplit("/", 1)[-1] in ("approve", "reject", "apply", "evidence")
    if message.type == "error" and not refused and not url.endswith("/favicon.ico"):
        errors.append(f"{name}: {message.text} at {url}")


def _shoot(page: Any, stage: str) -> None:
    """The page at both widths: nothing wider than the screen; the top of the page and the whole."""
    for width, height in WIDTHS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{stage}: wider than {width} px"
        page.screenshot(path=str(SHOTS / f"decision-walk-{stage}-{width}.png"))
        page.locator("#tradeoff-simulate").screenshot(path=str(SHOTS / f"decision-walk-{stage}-simulate-{width}.png"))
    page.screenshot(path=str(SHOTS / f"decision-walk-{stage}-full.png"), full_page=True)


def test_the_decision_walk_on_mixed_hardware_evidence(stack, page):
    _person("mia", "maintainers", "operators")
    _person("avi", "approvers")
    stack.start_web()
    base, browser, errors = stack.base_url, page.context.browser, []
    SHOTS.mkdir(parents=True, exist_ok=True)

    # mia, an operator, creates the A100 recipe through its form: it declares its hardware
    mia = _as(browser, base, "/recipes/new", "mia", 1280, 900, errors)
    mia.fill("input[name=name]", "llama-a100")
    mia.select_option("select[name=policy]", "cost")
    mia.fill("input[name=hardware]", "A100")
    mia.check("input[name=required_evidence][value=real_ttft]")
    for width, height in WIDTHS:
        mia.set_viewport_size({"width": width, "height": height})
        assert mia.evaluate("document.documentElement.scrollWidth") <= width
        mia.screenshot(path=str(SHOTS / f"decision-walk-recipe-form-{width}.png"), full_page=True)
    mia.click("#recipe-form button[type=submit]")
    mia.wait_for_url("**/recipes/llama-a100")
    recipe = Recipe.objects.get(name="llama-a100")
    assert (recipe.hardware, recipe.required_evidence) == ("A100", ["real_ttft"])
    a100_cap = _done(recipe, "capacity", execution="llama-2-7b-a100", requests=40, **RATES)
    a100_sim = _done(recipe, "simulate", execution="llama-2-7b-a100", requests=40, rate_per_s=2.0)
    h100_sim = _done(recipe, "simulate", execution="llama-2-7b-h100", requests=40, rate_per_s=2.0)
    overloaded = _done(recipe, "simulate", execution="llama-2-7b-a100", requests=200, rate_per_s=40.0)

    # mia proposes rule, citing the A100 and H100 jobs, through the form
    mia.goto(f"{base}/decisions/new")
    mia.select_option("#id_recipe", "llama-a100")
    mia.select_option("#id_policy", "rule")
    mia.fill("#id_rationale", "One launch per chunk; the A100 capacity holds.")
    mia.select_option("#id_evidence", [str(j.pk) for j in (a100_cap, a100_sim, h100_sim)])
    mia.click("#decision-form button[type=submit]")
    mia.wait_for_url("**/decisions/*")
    decision = PolicyDecision.objects.get()
    head = " ".join(mia.text_content("#decision-head").split())
    assert "pending" in head and "recipe on A100" in head
    assert "Needs approval (or rejection) by a maintainer other than mia" in head and "real TTFT measured" in head
    assert mia.locator("#decision-head form[data-step=withdraw]").count() == 1  # the author's one action
    # the verdict: the A100 jobs only; the H100 one named, not read
    verdict = " ".join(mia.text_content("#verdict").split())
    assert f"job #{a100_cap.pk}, A100" in verdict and f"job #{h100_sim.pk}, " not in verdict
    assert f"job #{h100_sim.pk} ran on H100, not this recipe's A100" in verdict
    sims = mia.locator("#tradeoff-simulate .part")
    assert sims.count() == 2  # both shown: the A100 one first, the H100 one after, under its banner
    assert sims.nth(0).get_attribute("data-job") == str(a100_sim.pk)
    assert "Not this recipe's evidence" in sims.nth(1).text_content() and "H100" in sims.nth(1).text_content()
    # the order a reader meets: status and action, verdict, then the detail
    tops = [mia.locator(s).bounding_box()["y"] for s in ("#decision-head", "#verdict", "#tradeoff")]
    assert tops == sorted(tops)
    _shoot(mia, "proposed")

    # avi, on a phone: reject without a reason, refused; the reason field is focused where he is
    avi = _as(browser, base, f"/decisions/{decision.pk}", "avi", 390, 844, errors)
    avi.click('form[data-step="reject"] button')
    avi.wait_for_selector('form[data-step="reject"] .error')
    focused = avi.evaluate(FOCUSED_IN_VIEW)
    assert (focused["name"], focused["step"], focused["visible"]) == ("reason", "reject", True)
    assert "required" in avi.text_content('form[data-step="reject"] .error')
    avi.screenshot(path=str(SHOTS / "decision-walk-refused-reject-390.png"))
    # approve, refused: the recipe requires a real TTFT; the error itself is focused, in view
    avi.click('form[data-step="approve"] button')
    avi.wait_for_selector('form[data-step="approve"] .error')
    focused = avi.evaluate(FOCUSED_IN_VIEW)
    assert (focused["id"], focused["visible"]) == ("error-approve", True)
    assert "requires evidence before approval" in avi.text_content("#error-approve")
    avi.screenshot(path=str(SHOTS / "decision-walk-refused-approve-390.png"))
    # avi cites one more job before deciding: none chosen is refused where he is, focused
    assert avi.locator(f'#id_add_evidence option[value="{a100_cap.pk}"]').count() == 0  # already cited
    avi.click("#add-evidence button")
    avi.wait_for_selector("#error-evidence")
    focused = avi.evaluate(FOCUSED_IN_VIEW)
    assert (focused["name"], focused["step"], focused["visible"]) == ("evidence", "evidence", True)
    assert "required" in avi.text_content("#error-evidence")
    avi.screenshot(path=str(SHOTS / "decision-walk-refused-evidence-390.png"))
    avi.select_option("#id_add_evidence", str(overloaded.pk))
    avi.click("#add-evidence button")
    avi.wait_for_selector(f'#evidence li[data-job="{overloaded.pk}"]')
    assert "added by avi" in avi.text_content(f'#evidence li[data-job="{overloaded.pk}"]')
    assert "cited by mia" in avi.text_content(f'#evidence li[data-job="{a100_sim.pk}"]')
    part = avi.text_content(f'#tradeoff-simulate .part[data-job="{overloaded.pk}"]')
    assert "added by avi" in part and "Overloaded:" in part
    assert "Overloaded:" not in avi.text_content(f'#tradeoff-simulate .part[data-job="{a100_sim.pk}"]')
    # the verdict names the overloaded run, the rate each policy sustained, and reads its delta as queueing
    loads = {p["policy"]: p["load"] for p in overloaded.result["policies"]}
    vouch = avi.locator("#cannot-vouch li", has_text=f"job #{overloaded.pk} (simulate) was overloaded")
    assert vouch.count() == 2
    for name, load in loads.items():
        line = " ".join(vouch.filter(has_text=f"{name}: OVERLOADED").text_content().split())
        assert f"sustained {load['sustained_per_s']:g}/s" in line and "queueing, not the policy's effect" in line
    queued = avi.locator(f'#verdict .verdict-delta[data-job="{overloaded.pk}"]')
    assert "read as queueing" in queued.text_content()
    assert "read as queueing" not in avi.text_content(f'#verdict .verdict-delta[data-job="{a100_sim.pk}"]')
    _shoot(avi, "evidence-added")
    recipe_update(recipe=recipe, actor=None, required_evidence=[])  # the maintainers waive it
    avi.fill('form[data-step="approve"] input[name=reason]', "A100 capacity holds; H100 noted, not read")
    avi.click('form[data-step="approve"] button')
    avi.wait_for_function("document.getElementById('decision-status').textContent === 'approved'")
    assert "needs an operator to apply it" in avi.text_content("#decision-needs")
    assert avi.locator("#decision-head form").count() == 0  # an approver may not apply

    # mia applies
    mia.reload()
    assert "needs an operator to apply it" in mia.text_content("#decision-needs")
    mia.click('#decision-head form[data-step="apply"] button')
    mia.wait_for_function("document.getElementById('decision-status').textContent === 'applied'")
    assert "Applied as v2: engines run rule now" in mia.text_content("#decision-needs")
    assert mia.locator("#decision-head #rollback-link").is_visible()  # what the reader may do next
    _shoot(mia, "applied")
    assert errors == []
