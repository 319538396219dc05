"""Throttles answer 429: repeated wrong passwords lock a user out from that address, repeated
wrong API tokens lock out the address, and a user with too many queued jobs must wait."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from heliosweb.jobs.models import BenchmarkJob
from heliosweb.telemetry.tokens import user_token_issue

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_counters")]


def _log_in(client: Client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_wrong_passwords_lock_that_user_out_from_that_address(settings):
    settings.AXES_FAILURE_LIMIT = 3
    User.objects.create_user("victim", password="right-password-123")
    client = Client()
    for _ in range(2):
        assert _log_in(client, "victim", "guess").status_code == 200  # the form again, with its error
    locked = _log_in(client, "victim", "guess")
    assert locked.status_code == 429 and b"Too many failed logins" in locked.content
    assert _log_in(client, "victim", "right-password-123").status_code == 429  # even the right one, for now
    # Another address, or another user from this one, is not locked.
    assert _log_in(Client(), "victim", "right-password-123", address="10.0.0.2").status_code == 302
    User.objects.create_user("bystander", password="other-password-123")
    assert _log_in(Client(), "bystander", "other-password-123").status_code == 302


def test_a_lockout_says_when_to_retry_with_retry_after_and_on_its_page(settings):
    from datetime import timedelta

    from axes.models import AccessAttempt
    from django.utils import timezone

    settings.AXES_FAILURE_LIMIT = 2
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    User.objects.create_user("victim", password="right-password-123")
    client = Client()
    assert _log_in(client, "victim", "guess").status_code == 200
    locked = _log_in(client, "victim", "guess")
    assert locked.status_code == 429
    assert 0 < int(locked["Retry-After"]) <= 15 * 60
    page = locked.content.decode()
    assert 'id="locked-until"' in page and "UTC" in page and "in about <span" in page and "15 minutes" in page
    # The lock runs from the latest failure, and an attempt while locked (even the right password)
    # is one: ten minutes on, it starts the whole wait again.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=10))
    again = _log_in(Client(), "victim", "right-password-123")
    assert again.status_code == 429 and int(again["Retry-After"]) > 10 * 60
    # Where attempts while locked do not count (axes' setting), ten minutes on, five are left.
    settings.AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=10))
    later = _log_in(Client(), "victim", "right-password-123")
    assert later.status_code == 429 and 0 < int(later["Retry-After"]) <= 5 * 60


def test_a_lockout_asked_for_json_answers_the_error_shape_with_retry_after(settings):
    settings.AXES_FAILURE_LIMIT = 1
    User.objects.create_user("victim", password="right-password-123")
    locked = Client().post(
        "/accounts/login/",
        {"username": "victim", "password": "guess"},
        REMOTE_ADDR="10.0.0.1",
        HTTP_X_REQUESTED_WITH="XMLHttpRequest",
    )
    assert locked.status_code == 429 and int(locked["Retry-After"]) > 0
    body = locked.json()
    assert body["field"] == "password" and f"try again in {locked['Retry-After']} s" in body["error"]


def test_wrong_tokens_are_throttled_per_address_with_retry_after(settings, maintainer):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token_failure": "3/min"}}
    good = user_token_issue(user=maintainer)
    client = APIClient()
    for i in range(3):
        response = client.get("/api/jobs/", HTTP_AUTHORIZATION=f"Bearer wrong{i}")
        assert response.status_code == 401
    refused = client.get("/api/jobs/", HTTP_AUTHORIZATION="Bearer wrong-again")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert refused.json()["field"] == "authorization"
    assert client.get("/api/jobs/", HTTP_AUTHORIZATION=f"Bearer {good}").status_code == 429  # the address waits
    other = client.get("/api/jobs/", HTTP_AUTHORIZATION=f"Bearer {good}", REMOTE_ADDR="10.9.9.9")
    assert other.status_code == 200


def test_a_user_with_too_many_queued_jobs_gets_429_and_nothing_is_stored(settings, maintainer, queued):
    settings.HELIOS_MAX_QUEUED_JOBS_PER_USER = 2
    api = APIClient()
    api.force_authenticate(maintainer)
    for _ in range(2):
        assert api.post("/api/jobs/", {"kind": "pr22"}, format="json").status_code == 201
    refused = api.post("/api/jobs/", {"kind": "pr22"}, format="json")
    assert refused.status_code == 429 and refused["Retry-After"] == str(settings.HELIOS_QUEUED_RETRY_AFTER_SECONDS)
    assert refused.json()["field"] == "queued_jobs"
    assert BenchmarkJob.objects.count() == 2
    # The form says the same.
    browser = Client()
    browser.force_login(maintainer)
    page = browser.post("/jobs/new", {"kind": "pr22"})
    assert page.status_code == 429 and b'data-field="queued_jobs"' in page.content
    assert BenchmarkJob.objects.count() == 2
    # Once one has started, there is room again.
    BenchmarkJob.objects.filter(pk=BenchmarkJob.objects.first().pk).update(status="running")
    assert api.post("/api/jobs/", {"kind": "pr22"}, format="json").status_code == 201
