"""While Redis or the database is away every API answer is a JSON 503 with `Retry-After`, never a
500 and never an HTML page: DRF views, the engine-token check that runs before any view, and the
engines' async policy read (which no middleware runs). Redis away is a real closed port; the
database refusing is injected as the `OperationalError` its driver raises, on both databases
(`test_db_connection_lost.py` cuts a real PostgreSQL connection; `test_db_drills.py` refuses
whole connections under `./dev up`)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import OperationalError
from django.test import Client

from heliosweb.devtool import free_port
from heliosweb.recipes import policy_poll
from heliosweb.telemetry import middleware

pytestmark = pytest.mark.django_db(transaction=True)


def engine_client() -> Client:
    out = StringIO()
    call_command("create_api_token", engine="eng-away", recipes="tiny-cpu", stdout=out)
    return Client(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")


def refused(times: int):
    """A read that finds the database refusing its connection the first `times` calls."""
    calls: list[int] = []

    def wrap(read):
        def flaky(*args, **kwargs):
            calls.append(1)
            if len(calls) <= times:
                raise OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')
            return read(*args, **kwargs)

        return flaky

    return wrap, calls


def assert_unavailable(response, field: str) -> None:
    assert response.status_code == 503, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == "2"
    assert response.json()["field"] == field and "retry in 2 s" in response.json()["error"]


def test_a_token_request_while_redis_is_away_answers_json_503(settings, maintainer):
    """The token throttle's counters are in the default cache, on Redis once REDIS_URL is set."""
    out = StringIO()
    call_command("create_api_token", "maint", stdout=out)
    token = out.getvalue().strip().splitlines()[-1]
    settings.CACHES = {
        **settings.CACHES,
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
        },
    }
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert_unavailable(client.get("/api/jobs/"), "redis")
    assert_unavailable(client.post("/api/jobs/", {"kind": "pulse"}, content_type="application/json"), "redis")


def test_the_policy_read_retries_a_refused_read_once_then_answers_json_503(recipe, monkeypatch):
    client = engine_client()
    wrap, calls = refused(times=1)
    monkeypatch.setattr(policy_poll, "recipe_policy_get", wrap(policy_poll.recipe_policy_get))
    once = client.get("/api/recipes/tiny-cpu/policy")
    assert once.status_code == 200 and once.json()["policy"] == "cost" and len(calls) == 2

    wrap, calls = refused(times=2)
    monkeypatch.setattr(policy_poll, "recipe_policy_get", wrap(policy_poll.recipe_policy_get))
    assert_unavailable(client.get("/api/recipes/tiny-cpu/policy"), "database")
    # a long-poll too: its first read is the one refused
    wrap, calls = refused(times=2)
    monkeypatch.setattr(policy_poll, "recipe_policy_get", wrap(policy_poll.recipe_policy_get))
    assert_unavailable(client.get("/api/recipes/tiny-cpu/policy?wait=1", HTTP_IF_NONE_MATCH='"v1"'), "database")


def test_the_engine_token_check_answers_json_503_when_the_database_refuses(recipe, monkeypatch):
    client = engine_client()
    grant_get = middleware.engine_grant_get
    for request in (
        lambda: client.get("/api/recipes/tiny-cpu/policy"),
        lambda: client.post("/api/recipes/tiny-cpu/telemetry/", "{}", content_type="application/json"),
    ):
        wrap, calls = refused(times=2)
        monkeypatch.setattr(middleware, "engine_grant_get", wrap(grant_get))
        assert_unavailable(request(), "database")
        assert len(calls) == 2  # read once more on a fresh connection before answering 503
    assert client.get("/api/recipes/tiny-cpu/policy").status_code == 200  # the database is back
