"""A login lockout as a person meets it in Chromium: the page says until when (and the answer
carries Retry-After). The screenshot lands in var/screenshots/login-lockout.png."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from .conftest import needs_chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def test_a_locked_out_login_shows_when_to_retry_in_chromium(live_server, page, settings):
    settings.AXES_FAILURE_LIMIT = 2
    User.objects.create_user("victim", password="right-password-123")
    page.goto(f"{live_server.url}/accounts/login/")
    for attempt in range(2):
        page.fill("#id_username", "victim")
        page.fill("#id_password", f"guess-{attempt}")
        with page.expect_navigation() as answer:
            page.click("form[method=post] button[type=submit]")
    response = answer.value
    assert response.status == 429 and 0 < int(response.headers["retry-after"]) <= 15 * 60
    assert page.text_content("h1") == "Too many failed logins"
    assert page.is_visible("#locked-until") and "UTC" in page.text_content("#locked-until")
    assert page.get_attribute("#retry-after", "data-seconds") == response.headers["retry-after"]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "login-lockout.png"), full_page=True)
