"""No silent defaults (issue 21): a number field cleared, or holding text that is no number ("ten",
"abc", "1e400"), is refused at that field (400, the message under it, the input marked
aria-invalid and pointing at the message), nothing stored or queued; a field left as the page
showed it keeps its visible default. The job form, the recipe page's engine form, /explain."""

from __future__ import annotations

import re
from html import unescape as html_unescape

import pytest

from heliosweb.jobs.models import BenchmarkJob

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser_client(client, maintainer):
    client.force_login(maintainer)
    return client


def _marked(html: str, name: str) -> bool:
    """The input `name` carries aria-invalid and aria-describedby naming an element on the page."""
    tag = re.search(rf'<(?:input|textarea|select)[^>]*name="{re.escape(name)}"[^>]*>', html)
    assert tag, name
    described = re.search(r'aria-describedby="([^"]+)"', tag[0])
    return 'aria-invalid="true"' in tag[0] and bool(described) and f'id="{described[1]}"' in html


@pytest.mark.parametrize(
    ("field", "typed", "says"),
    [
        ("sweep.count", "", "must not be empty (its default is 256)"),
        ("sweep.count", "   ", "must not be empty (its default is 256)"),
        ("sweep.count", "ten", "must be an integer in decimal digits, got 'ten'"),
        ("sweep.count", "1e400", "must be an integer in decimal digits, got '1e400'"),
        ("sweep.drift_factor", "abc", "must be a finite number in decimal digits, got 'abc'"),
        ("sweep.drift_factor", "1e400", "must be a finite number in decimal digits, got '1e400'"),
        ("sweep.drift_factor", "", "must not be empty (its default is 1.6)"),
    ],
)
def test_a_cleared_or_unreadable_number_is_refused_at_its_field(browser_client, queued, field, typed, says):
    page = browser_client.get("/jobs/new?kind=sweep").content.decode()
    shown = dict(re.findall(r'<input[^>]*name="(sweep\.[a-z_]+)"[^>]*value="([^"]*)"', page))
    assert shown["sweep.count"] == "256" and 'name="sweep.count" value="256" inputmode="numeric"' in page
    response = browser_client.post("/jobs/new", {"kind": "sweep", **shown, field: typed})
    html = response.content.decode()
    assert response.status_code == 400
    error = re.search(rf'<p class="error" data-field="{re.escape(field)}" id="([^"]+)">([^<]*)</p>', html)
    assert error and says in html_unescape(error[2]), html[-2000:]
    assert _marked(html, field)
    assert f'value="{typed}"' in html  # what was typed stays in the field
    assert BenchmarkJob.objects.count() == 0 and queued == []


def test_fields_left_as_shown_run_with_their_visible_defaults(
    browser_client, queued, django_capture_on_commit_callbacks
):
    page = browser_client.get("/jobs/new?kind=sweep").content.decode()
    shown = dict(re.findall(r'<input[^>]*name="(sweep\.[a-z_]+)"[^>]*value="([^"]*)"', page))
    with django_capture_on_commit_callbacks(execute=True):
        response = browser_client.post("/jobs/new", {"kind": "sweep", **shown})
    assert response.status_code == 302
    job = BenchmarkJob.objects.get()
    assert job.params["count"] == 256 and job.params["drift_factor"] == 1.6 and len(queued) == 1


@pytest.mark.parametrize(
    ("typed", "says"),
    [("", "must not be empty (its default is 20.0)"), ("ten", "must be a finite number in decimal digits")],
)
def test_the_engine_forms_rate_is_refused_at_its_field(browser_client, recipe, queued, typed, says):
    page = browser_client.get(f"/recipes/{recipe.name}").content.decode()
    assert re.search(r'name="rate_per_s"[^>]*value="20"', page)
    response = browser_client.post(
        f"/recipes/{recipe.name}/engine", {"action": "start", "catalog": "clean", "rate_per_s": typed}
    )
    html = response.content.decode()
    assert response.status_code == 400 and says in html
    assert _marked(html, "rate_per_s") and re.search(rf'name="rate_per_s"[^>]*value="{typed}"', html, re.S)
    assert BenchmarkJob.objects.count() == 0 and queued == []


def test_explain_refuses_a_cleared_prompt_at_its_field_and_keeps_it_cleared(browser_client):
    response = browser_client.get("/explain?prompt_tokens=&catalog=clean")
    html = response.content.decode()
    assert response.status_code == 400 and 'name="prompt_tokens" value=""' in html
    assert _marked(html, "prompt_tokens") and 'id="error-prompt_tokens"' in html
    html = browser_client.get("/explain?prompt_tokens=3504&atomic_spans=1-2-3").content.decode()
    assert _marked(html, "atomic_spans")


def test_a_refused_decision_step_shows_its_error_at_that_steps_form(client, author, reviewer, recipe):
    """Rejecting without the required reason: 400, the message under the reject form's reason
    (marked for assistive technology), not in the page's banner; the decision unchanged."""
    from heliosweb.decisions import services

    decision = services.decision_propose(actor=author, recipe=recipe.name, policy="rule", rationale="why " * 200)
    client.force_login(reviewer)
    response = client.post(f"/decisions/{decision.pk}/reject", {"reason": "  "})
    html = response.content.decode()
    assert response.status_code == 400
    form = html.split('data-step="reject"')[1].split("</form>")[0]
    assert 'id="error-reject"' in form and 'data-field="reason"' in form and _marked(form, "reason")
    assert 'class="message error"' not in html
    decision.refresh_from_db()
    assert decision.status == "pending"
    assert 'id="rationale" class="wrap"' in html  # a long rationale wraps (the page was 1,641 px wide)
