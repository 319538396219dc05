"""Throttles answer 429: repeated wrong passwords lock a user out from that address, repeated
wrong API tokens lock out the address, and a user with too many queued jobs must wait."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from heliosweb.jobs.models import BenchmarkJob

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counters():
    cache.clear()
    yield
    cache.clear()


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


def test_wrong_tokens_are_throttled_per_address_with_retry_after(settings, maintainer):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token_failure": "3/min"}}
    good = Token.objects.create(user=maintainer).key
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
