"""Engines' telemetry posts through the ASGI application, as daphne hands them over: the fast path
(`heliosweb.telemetry.fast_path`) answers and stores as the DRF view does, keeps its connection
from batch to batch, and hands everything else to Django with the body it already read."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import ApplicationCommunicator, HttpCommunicator
from django.core.management import call_command
from django.db import connections
from django.test.utils import CaptureQueriesContext

from heliosweb.asgi import django_asgi_app
from heliosweb.telemetry import fast_path
from heliosweb.telemetry.fast_path import EngineTelemetryFastPath
from heliosweb.telemetry.models import Rollup, TelemetryBatch, Totals
from heliosweb.telemetry.validation import MAX_BYTES

from .telemetry_records import SESSION, body, finished, launch

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]
PATH = "/api/recipes/tiny-cpu/telemetry/"


class Django:
    """Django's application behind the fast path, counting the requests that reach it."""

    def __init__(self) -> None:
        self.requests = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.requests += 1
        await django_asgi_app(scope, receive, send)


@pytest.fixture
def django() -> Django:
    return Django()


@pytest.fixture
def app(django: Django):
    yield EngineTelemetryFastPath(django)
    # The ingest thread outlives the test: its connection goes, as the test database will.
    fast_path._INGEST.submit(connections.close_all).result()


@pytest.fixture
def token(recipe) -> str:
    out = StringIO()
    call_command("create_api_token", engine="eng-1", recipes="tiny-cpu", stdout=out)
    return out.getvalue().strip()


def headers(
    token: str, content_type: str = "application/json", host: str = "testserver", scheme: str = "Bearer"
) -> list:
    return [
        (b"authorization", f"{scheme} {token}".encode()),
        (b"content-type", content_type.encode()),
        (b"host", host.encode()),
    ]


async def post(app, body: Any, token: str, **options: str) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = [*headers(token, **options), (b"content-length", str(len(data)).encode())]
    answered_by_django = app.app.requests
    response = await HttpCommunicator(app, "POST", PATH, data, sent).get_response(timeout=10)
    if app.app.requests == answered_by_django:  # the fast path answered: a kept-alive client reads its length
        assert dict(response["headers"])[b"content-length"] == str(len(response["body"])).encode()
    return response["status"], json.loads(response["body"])


@database_sync_to_async  # closes its connection after: the test database is dropped at the end
def stored() -> tuple[int, int, int]:
    return TelemetryBatch.objects.count(), Rollup.objects.count(), Totals.objects.count()


async def test_a_batch_is_answered_and_stored_without_django_and_a_retry_is_stored_once(app, django, token):
    sent = body([launch(0), launch(1), finished(0)], 1)
    assert await post(app, sent, token) == (
        201,
        {"engine": "eng-1", "session": SESSION, "batch": 1, "stored": True, "launches": 2, "requests": 1},
    )
    assert await post(app, sent, token) == (
        200,
        {"engine": "eng-1", "session": SESSION, "batch": 1, "stored": False, "launches": 2, "requests": 1},
    )
    assert await stored() == (1, 1, 1)
    row = await database_sync_to_async(Rollup.objects.get)()
    assert (row.prefill_launches, row.launched_tokens, row.padded_tokens, row.requests) == (2, 1024, 424, 1)
    assert django.requests == 0


async def test_launch_only_batches_add_to_the_rollup_in_one_update_each(app, token):
    await post(app, body([launch(0), finished(0)], 1), token)
    capture = fast_path._INGEST.submit(lambda: CaptureQueriesContext(connections["default"]).__enter__()).result()
    status, _ = await post(app, body([launch(1), launch(2)], 2), token)
    fast_path._INGEST.submit(capture.__exit__, None, None, None).result()
    assert status == 201
    sql = [q["sql"] for q in capture.captured_queries]
    # the recipe, the frame number, the rollup's and the totals' counters, the insert (and BEGIN/COMMIT)
    assert sum(not s.startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")) for s in sql) <= 5, sql
    row, totals = await database_sync_to_async(lambda: (Rollup.objects.get(), Totals.objects.get()))()
    for r in (row, totals):
        assert (r.prefill_launches, r.launched_tokens, r.padded_tokens, r.requests) == (3, 1536, 636, 1)


@pytest.mark.parametrize(
    ("records", "field"),
    [
        ([launch(), launch(graph=0)], "records[1].graph"),
        ([launch(), finished(itl_ms=[1.0, -2.0])], "records[1].itl_ms[1]"),
        ([launch(version=2)], "records[0].version"),
    ],
)
async def test_a_bad_record_is_named_and_nothing_is_stored(app, django, token, records, field):
    status, answer = await post(app, body(records, 7), token)
    assert (status, answer["field"]) == (400, field), answer
    assert await stored() == (0, 0, 0) and django.requests == 0


async def test_a_body_that_is_not_json_is_named(app, token):
    status, answer = await post(app, b'{"engine": "eng-1", "batch": ', token)
    assert (status, answer["field"]) == (400, "body") and "not JSON" in answer["error"]
    assert await stored() == (0, 0, 0)


async def test_requests_off_the_common_case_get_djangos_own_answers(app, django, token, recipe):
    sent = body([launch()], 1)
    status, answer = await post(app, sent, "heng_not-a-token")
    assert (status, answer["field"]) == (401, "authorization")
    status, answer = await post(app, sent, token, content_type="text/plain")
    assert (status, answer["field"]) == (415, "content_type")
    status, _ = await post(app, sent, token, host="evil.example")
    assert status == 400
    status, _ = await post(app, sent, token, scheme="bearer")  # the scheme as the token middleware reads it
    assert status == 403
    scope = {"type": "http", "method": "POST", "path": PATH, "query_string": b""}
    scope["headers"] = [*headers(token), (b"content-length", b"12x")]
    communicator = ApplicationCommunicator(app, scope)
    await communicator.send_input({"type": "http.request", "body": json.dumps(sent).encode()})
    assert (await communicator.receive_output(timeout=10))["type"] == "http.response.start"
    assert django.requests == 5 and await stored() == (0, 0, 0)


async def test_a_token_for_another_recipe_is_refused_by_the_token_scope(app, django, recipe):
    from heliosweb.recipes.services import recipe_create

    await database_sync_to_async(recipe_create)(name="other", policy="cost")
    out = StringIO()
    await database_sync_to_async(call_command)("create_api_token", engine="eng-2", recipes="other", stdout=out)
    status, answer = await post(app, body([launch()], 1, engine="eng-2"), out.getvalue().strip())
    assert (status, answer["field"]) == (403, "authorization") and django.requests == 1


async def test_a_body_over_the_limit_reaches_django_whole(token):
    """Sent in chunks with no Content-Length: the fast path stops reading past MAX_BYTES and hands
    the request on; what it read comes first, then the rest, nothing lost or repeated."""
    received: list[bytes] = []

    async def behind(scope: Any, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            received.append(message["body"])
            if not message["more_body"]:
                break
        await send({"type": "http.response.start", "status": 413, "headers": []})
        await send({"type": "http.response.body", "body": str(len(b"".join(received))).encode()})

    scope = {"type": "http", "method": "POST", "path": PATH, "query_string": b"", "headers": headers(token)}
    communicator = ApplicationCommunicator(EngineTelemetryFastPath(behind), scope)
    chunks = [bytes([65 + i]) * (1024 * 1024) for i in range(MAX_BYTES // (1024 * 1024) + 2)] + [b"{}"]
    for i, chunk in enumerate(chunks):
        await communicator.send_input({"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1})
    assert (await communicator.receive_output(timeout=10))["status"] == 413
    assert (await communicator.receive_output(timeout=10))["body"] == str(sum(map(len, chunks))).encode()
    assert b"".join(received) == b"".join(chunks)


async def test_a_connection_lost_between_batches_is_replaced(app, token):
    """The ingest thread keeps its connection; when the database drops it (a restart), the next
    batches open a new one instead of failing forever."""
    await post(app, body([launch()], 1), token)
    fast_path._INGEST.submit(lambda: connections["default"].connection.close()).result()
    statuses = [(await post(app, body([launch()], n), token))[0] for n in (2, 3)]
    assert statuses[-1] == 201 and set(statuses) <= {201, 500}
    assert (await stored())[0] == 1 + statuses.count(201)


async def test_a_number_reused_with_other_records_is_a_409_on_the_fast_path_too(app, django, token):
    assert (await post(app, body([launch(0)], 9), token))[0] == 201
    status, answer = await post(app, body([launch(1)], 9), token)
    assert (status, answer["field"]) == (409, "batch") and "batch 9" in answer["error"]
    restarted = await post(app, body([launch(1)], 9, session="7d0c7a8e-2f57-4df4-8d0e-5b6a0f3c9e21"), token)
    assert restarted[0] == 201 and django.requests == 0
    assert (await stored())[0] == 2
