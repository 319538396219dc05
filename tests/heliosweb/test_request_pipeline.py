"""One request pipeline (`server.handler`): engines' telemetry posts run Django's whole cycle
(the middleware list as configured, the request signals, SECURE_SSL_REDIRECT, the security headers)
in one kept thread that keeps its database connection; the policy long-poll's on the event loop;
and the HTTP that real clients send: gzip bodies (bounded once decompressed), the Bearer scheme in
any case, `If-None-Match: *`, 401 with a challenge when no credentials come."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from io import StringIO
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import HttpCommunicator
from django.conf import settings
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.test import Client

from heliosweb.pipeline.request_body import gunzip
from heliosweb.recipes import policy_poll
from heliosweb.server import loop_middleware
from heliosweb.server.handler import HeliosASGIHandler, lane_of
from heliosweb.telemetry import api as telemetry_api
from heliosweb.telemetry.models import TelemetryBatch

from .telemetry_records import body as batch_body
from .telemetry_records import launch

PATH = "/api/recipes/tiny-cpu/telemetry/"
LANE = lane_of(telemetry_api.recipe_telemetry)


@pytest.fixture
def engine(recipe: Any) -> str:
    out = StringIO()
    call_command("create_api_token", engine="eng-1", recipes="tiny-cpu", stdout=out)
    return out.getvalue().strip()


@pytest.fixture
def user_token(maintainer: Any) -> str:
    out = StringIO()
    call_command("create_api_token", maintainer.username, stdout=out)
    return out.getvalue().strip().split()[-1]


def body(n: int) -> bytes:
    return json.dumps(batch_body([launch(n)], batch=n)).encode()


async def post(app: Any, data: bytes, token: str, *extra: tuple[bytes, bytes]) -> dict[str, Any]:
    headers = [
        (b"host", b"testserver"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        *extra,
    ]
    return await HttpCommunicator(app, "POST", PATH, data, headers).get_response(timeout=10)


async def served_whole(app: Any, data: bytes, token: str) -> dict[str, Any]:
    """The answer, once the application has returned (and so closed the response: request_finished)."""
    scope = {"type": "http", "method": "POST", "path": PATH, "query_string": b"", "scheme": "http"}
    scope["headers"] = [(b"host", b"testserver"), (b"authorization", f"Bearer {token}".encode())]
    scope["headers"] += [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    messages = [{"type": "http.request", "body": data}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # no disconnect: Django cancels this once it has answered
        return {}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asyncio.wait_for(app(scope, receive, send), 10)
    return {"status": sent[0]["status"], "headers": sent[0]["headers"]}


@pytest.fixture
def close_lane():
    yield
    assert LANE is not None
    LANE.submit(connections.close_all).result()  # the kept connection goes before the test database does


@database_sync_to_async
def stored() -> int:
    return TelemetryBatch.objects.count()


# --- the lane runs Django's cycle -------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_telemetry_post_runs_the_request_signals_and_the_whole_middleware_list(engine, close_lane):
    signals: list[str] = []

    def started(**kwargs: Any) -> None:
        signals.append("started")

    def finished(**kwargs: Any) -> None:
        signals.append("finished")

    request_started.connect(started)
    request_finished.connect(finished)
    try:
        response = await served_whole(HeliosASGIHandler(), body(1), engine)
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
    assert response["status"] == 201, response
    assert signals == ["started", "finished"]
    headers = dict(response["headers"])
    assert headers[b"X-Content-Type-Options"] == b"nosniff" and headers[b"Referrer-Policy"] == b"same-origin"
    assert b"Content-Security-Policy" in headers and headers[b"X-Frame-Options"] == b"DENY"
    assert await stored() == 1


def tag_header(get_response: Any) -> Any:
    """A middleware added later, as any would be: it must run on the telemetry lane too."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        response["X-Added-Later"] = "ran"
        return response

    return middleware


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_middleware_added_to_the_list_runs_on_the_lane(engine, settings, close_lane):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, f"{__name__}.tag_header"]
    response = await post(HeliosASGIHandler(), body(1), engine)
    assert response["status"] == 201 and dict(response["headers"])[b"X-Added-Later"] == b"ran"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_plain_http_post_is_redirected_when_ssl_redirect_is_on(engine, settings, close_lane):
    settings.SECURE_SSL_REDIRECT = True
    response = await post(HeliosASGIHandler(), body(1), engine)
    assert response["status"] == 301 and dict(response["headers"])[b"Location"] == f"https://testserver{PATH}".encode()
    assert await stored() == 0


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_lane_keeps_its_connection_and_replaces_one_the_database_dropped(engine, close_lane):
    app = HeliosASGIHandler()
    assert LANE is not None
    assert (await post(app, body(1), engine))["status"] == 201
    first = LANE.submit(lambda: connections["default"].connection).result()
    assert (await post(app, body(2), engine))["status"] == 201
    assert LANE.submit(lambda: connections["default"].connection).result() is first  # kept, not reopened
    LANE.submit(lambda: connections["default"].connection.close()).result()  # as a database restart would
    statuses = [(await post(app, body(n), engine))["status"] for n in (3, 4)]
    assert statuses[-1] == 201 and set(statuses) <= {201, 500}  # at most one 500 (the engine retries it)
    assert await stored() == 2 + statuses.count(201)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_chunked_body_has_its_length_as_django_reads_it(engine, close_lane):
    """No Content-Length (daphne has decoded the chunks): the length is the body's, not 0."""
    data = body(1)
    headers = [(b"host", b"testserver"), (b"authorization", f"Bearer {engine}".encode())]
    headers += [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")]
    response = await HttpCommunicator(HeliosASGIHandler(), "POST", PATH, data, headers).get_response(timeout=10)
    assert response["status"] == 201, response["body"]


# --- gzip bodies -------------------------------------------------------------------------------------


def test_a_gzip_body_is_stored_as_its_plain_twin(engine):
    response = Client().post(
        PATH,
        gzip.compress(body(1)),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {engine}",
        HTTP_CONTENT_ENCODING="gzip",
    )
    assert response.status_code == 201, response.content
    assert TelemetryBatch.objects.get().launch_count == 1


def test_a_gzip_bomb_is_413_naming_the_limit_and_nothing_is_stored(engine):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    bomb = gzip.compress(b" " * (limit * 4))  # ~20 KB that would be 21 MB
    assert len(bomb) < 100_000
    response = Client().post(
        PATH, bomb, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {engine}", HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 413 and response.json()["field"] == "body"
    assert f"{limit:,}" in response.json()["error"] and TelemetryBatch.objects.count() == 0


@pytest.mark.parametrize(
    ("data", "encoding", "status", "field"),
    [
        (b"not gzip at all", "gzip", 400, "body"),
        (gzip.compress(b'{"a": 1}')[:-6], "gzip", 400, "body"),
        (b"{}", "br", 415, "content_encoding"),
    ],
)
def test_a_body_that_is_not_what_its_encoding_says_is_refused(engine, data, encoding, status, field):
    response = Client().post(
        PATH,
        data,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {engine}",
        HTTP_CONTENT_ENCODING=encoding,
    )
    assert (response.status_code, response.json()["field"]) == (status, field)
    assert TelemetryBatch.objects.count() == 0


def test_gunzip_reads_several_members_and_never_produces_more_than_its_limit():
    assert gunzip(gzip.compress(b"ab") + gzip.compress(b"cd"), 4) == b"abcd"
    with pytest.raises(ValueError, match="over 3 bytes"):
        gunzip(gzip.compress(b"ab") + gzip.compress(b"cd"), 3)


# --- the auth scheme, the policy read, 401 vs 403 --------------------------------------------------


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_bearer_scheme_is_read_in_any_case_everywhere(scheme, engine, user_token, settings):
    """The API's token authentication, the engine-token scope, the policy read, the telemetry post
    and /metrics: one parser (`common.auth.bearer_token`)."""
    assert Client().get("/api/jobs/", HTTP_AUTHORIZATION=f"{scheme} {user_token}").status_code == 200
    policy = Client().get("/api/recipes/tiny-cpu/policy", HTTP_AUTHORIZATION=f"{scheme} {engine}")
    assert policy.status_code == 200 and policy.json()["recipe"] == "tiny-cpu"
    posted = Client().post(PATH, body(1), content_type="application/json", HTTP_AUTHORIZATION=f"{scheme} {engine}")
    assert posted.status_code == 201, posted.content
    settings.HELIOS_METRICS_TOKEN = "metrics-secret"
    assert (
        Client(REMOTE_ADDR="10.0.0.9").get("/metrics", HTTP_AUTHORIZATION=f"{scheme} metrics-secret").status_code == 200
    )


def test_an_engine_token_off_its_routes_is_403_whatever_the_schemes_case(engine):
    response = Client().get("/api/jobs/", HTTP_AUTHORIZATION=f"bearer {engine}")
    assert (response.status_code, response.json()["field"]) == (403, "authorization")


def test_if_none_match_star_is_304_on_the_policy_read_and_a_long_poll_waits_out_its_deadline(engine):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {engine}", "HTTP_IF_NONE_MATCH": "*"}
    response = Client().get("/api/recipes/tiny-cpu/policy", **auth)
    assert response.status_code == 304 and response["ETag"] == '"v1"'
    assert Client().get("/api/recipes/tiny-cpu/policy?wait=0.2", **auth).status_code == 304


def test_telemetry_without_credentials_is_401_with_a_challenge_and_a_viewer_is_403(recipe, viewer):
    response = Client().post(PATH, body(1), content_type="application/json")
    assert (response.status_code, response.json()["field"]) == (401, "authorization")
    assert response["WWW-Authenticate"].startswith("Bearer")
    client = Client()
    client.force_login(viewer)
    response = client.post(PATH, body(1), content_type="application/json")
    assert (response.status_code, response.json()["field"]) == (403, "authorization")


# --- the policy long-poll runs on the loop ---------------------------------------------------------

POLL_LANE = lane_of(policy_poll.recipe_policy)


@pytest.fixture
def close_poll_lane():
    yield
    assert POLL_LANE is not None
    POLL_LANE.submit(connections.close_all).result()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_long_poll_runs_its_middleware_on_the_loop_and_its_sync_calls_in_its_kept_thread(
    engine, monkeypatch, close_poll_lane
):
    """The whole list still runs (the security headers), a library middleware's methods on the
    loop's own thread (no hop), and the request signals' receivers and the reads in the view's one
    kept thread (no thread started per request)."""
    seen: dict[str, str] = {}
    answer = loop_middleware.XFrameOptionsMiddleware.process_response

    def on_thread(self: Any, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        seen["middleware"] = threading.current_thread().name
        return answer(self, request, response)

    def started(**kwargs: Any) -> None:
        seen["signal"] = threading.current_thread().name

    monkeypatch.setattr(loop_middleware.XFrameOptionsMiddleware, "process_response", on_thread)
    request_started.connect(started)
    try:
        headers = [(b"host", b"testserver"), (b"authorization", f"Bearer {engine}".encode())]
        path = "/api/recipes/tiny-cpu/policy"
        response = await HttpCommunicator(HeliosASGIHandler(), "GET", path, headers=headers).get_response(timeout=10)
    finally:
        request_started.disconnect(started)
    assert response["status"] == 200, response
    assert json.loads(response["body"])["recipe"] == "tiny-cpu"
    assert dict(response["headers"])[b"X-Frame-Options"] == b"DENY"
    assert b"Content-Security-Policy" in dict(response["headers"])
    assert seen["middleware"] == threading.current_thread().name  # the test's loop runs on this thread
    assert seen["signal"].startswith("policy-poll")
