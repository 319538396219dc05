"""Throttling by the real client (issue 18, row 7): `X-Forwarded-For` is anyone's to write, so the
token throttle, the login lockout, `/metrics`' allow-list and the audit trail ignore it unless
`HELIOS_TRUSTED_PROXIES` says how many proxies of ours stand in front."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from heliosweb.audit.models import AuditEvent
from heliosweb.common.clients import client_ip

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_counters")]


def request(remote: str = "10.0.0.1", forwarded: str | None = None):
    extra = {"REMOTE_ADDR": remote} | ({"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {})
    return RequestFactory().get("/", **extra)


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, None, "10.0.0.1"),
        (0, "6.6.6.6", "10.0.0.1"),  # off by default: the header is ignored
        (1, None, "10.0.0.1"),
        (1, "203.0.113.7", "203.0.113.7"),
        (1, "6.6.6.6, 203.0.113.7", "203.0.113.7"),  # what the client wrote on the left is never used
        (2, "6.6.6.6, 203.0.113.7, 10.1.1.1", "203.0.113.7"),
        (3, "203.0.113.7", "203.0.113.7"),  # fewer entries than proxies: the leftmost there is
        (1, "not-an-address", "10.0.0.1"),
        (1, " , ", "10.0.0.1"),
        (1, "2001:db8::1", "2001:db8::1"),
    ],
)
def test_the_client_is_read_from_the_right_of_x_forwarded_for_only_behind_trusted_proxies(
    settings, proxies, forwarded, expected
):
    settings.HELIOS_TRUSTED_PROXIES = proxies
    assert client_ip(request(forwarded=forwarded)) == expected


def test_the_default_trusts_no_proxy(settings):
    assert settings.HELIOS_TRUSTED_PROXIES == 0 and settings.REST_FRAMEWORK["NUM_PROXIES"] == 0


def _wrong_tokens(client: APIClient, n: int, **headers: str) -> list[int]:
    return [
        client.get("/api/jobs/", HTTP_AUTHORIZATION=f"Bearer wrong{i}", REMOTE_ADDR="10.0.0.1", **headers).status_code
        for i in range(n)
    ]


def test_a_new_forwarded_address_per_request_does_not_escape_the_token_throttle(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token_failure": "3/min"}}
    client = APIClient()
    codes = [
        client.get(
            "/api/jobs/",
            HTTP_AUTHORIZATION=f"Bearer wrong{i}",
            REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR=f"6.6.6.{i}",
        ).status_code
        for i in range(5)
    ]
    assert codes == [401, 401, 401, 429, 429]


def test_behind_a_trusted_proxy_the_token_throttle_counts_per_real_client(settings):
    settings.HELIOS_TRUSTED_PROXIES = 1
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token_failure": "3/min"}}
    client = APIClient()
    # Everyone arrives from the proxy (10.0.0.1); the proxy names each client on the right.
    assert _wrong_tokens(client, 4, HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.7") == [401, 401, 401, 429]
    assert _wrong_tokens(client, 1, HTTP_X_FORWARDED_FOR="203.0.113.8") == [401]  # another client is not locked


def _log_in(username: str, password: str, **extra: str) -> int:
    return Client().post("/accounts/login/", {"username": username, "password": password}, **extra).status_code


def test_forged_forwarded_addresses_neither_escape_nor_cause_a_lockout(settings):
    settings.AXES_FAILURE_LIMIT = 3
    User.objects.create_user("victim", password="right-password-123")
    codes = [_log_in("victim", "guess", REMOTE_ADDR="10.0.0.9", HTTP_X_FORWARDED_FOR=f"6.6.6.{i}") for i in range(4)]
    assert codes == [200, 200, 429, 429]  # one address, whatever the header says
    # The guesser could not lock the victim out of their own address by naming it in the header.
    assert _log_in("victim", "right-password-123", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="10.0.0.9") == 302
    [failed, *_] = AuditEvent.objects.filter(action="login_failed").order_by("seq")
    assert failed.client_addr == "10.0.0.9"


def test_behind_a_trusted_proxy_the_lockout_is_per_real_client(settings):
    settings.AXES_FAILURE_LIMIT = 2
    settings.HELIOS_TRUSTED_PROXIES = 1
    User.objects.create_user("victim", password="right-password-123")
    proxy = {"REMOTE_ADDR": "127.0.0.1"}
    assert [_log_in("victim", "guess", HTTP_X_FORWARDED_FOR="203.0.113.7", **proxy) for _ in range(2)] == [200, 429]
    assert _log_in("victim", "right-password-123", HTTP_X_FORWARDED_FOR="203.0.113.8", **proxy) == 302
    assert AuditEvent.objects.filter(action="login_failed").first().client_addr == "203.0.113.7"


def test_metrics_behind_a_local_proxy_are_not_public(settings):
    settings.HELIOS_METRICS_TOKEN = ""
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 200
    # A local proxy forwarding an outside client: not loopback, whether or not the proxy is declared.
    assert Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7").get("/metrics").status_code == 403
    # A forged header cannot make an outside client loopback.
    assert Client(REMOTE_ADDR="203.0.113.7", HTTP_X_FORWARDED_FOR="127.0.0.1").get("/metrics").status_code == 403
    settings.HELIOS_TRUSTED_PROXIES = 1
    assert Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7").get("/metrics").status_code == 403
    assert Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="127.0.0.1").get("/metrics").status_code == 200
