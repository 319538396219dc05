"""The job websocket: authentication, origin check, bad messages, replay then live, gap refill."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from heliosweb.asgi import application
from heliosweb.jobs.models import JobEvent
from heliosweb.jobs.services import events, submission

from .conftest import ORIGIN

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def _session_cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def _connect(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[WebsocketCommunicator, bool, object]:
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


async def _receive(communicator: WebsocketCommunicator) -> dict:
    return json.loads(await communicator.receive_from(timeout=5))


async def _close_code(path: str, headers: list[tuple[bytes, bytes]]) -> int | str:
    """How a refused client learns why: the close code after an accepted handshake, or
    "handshake" when the handshake itself was refused (HTTP 403)."""
    communicator, connected, _ = await _connect(path, headers)
    if not connected:
        return "handshake"
    output = await communicator.receive_output(timeout=5)
    assert output["type"] == "websocket.close", output
    return output["code"]


async def _make_job(maintainer):
    def create():
        job = submission.job_create(kind="pr22", user=maintainer)
        for i in range(3):
            events.event_append(job.pk, {"type": "progress", "done": i, "total": 4, "message": f"step {i}"})
        return job

    return await database_sync_to_async(create)()


async def test_an_anonymous_client_is_accepted_then_closed_with_4401(maintainer):
    job = await _make_job(maintainer)
    for path in (f"/ws/jobs/{job.pk}/", "/ws/jobs/", "/ws/recipes/"):
        assert await _close_code(path, [ORIGIN]) == 4401, path


async def test_a_foreign_or_missing_origin_is_refused_at_the_handshake(maintainer, settings):
    job = await _make_job(maintainer)
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    host = (b"host", b"127.0.0.1:8000")
    foreign = [
        [cookie],
        [cookie, (b"origin", b"http://evil.example")],
        # Same host name, another port or scheme: another program's page on the machine.
        [cookie, host, (b"origin", b"http://127.0.0.1:9999")],
        [cookie, host, (b"origin", b"http://localhost:8000")],
        [cookie, host, (b"origin", b"https://127.0.0.1:8000")],
        [cookie, (b"host", b"evil.example:8000"), (b"origin", b"http://evil.example:8000")],  # not an allowed host
    ]
    for headers in foreign:
        assert await _close_code(f"/ws/jobs/{job.pk}/", headers) == "handshake", headers
    settings.CSRF_TRUSTED_ORIGINS = ["https://helios.example.org"]
    for origin in (b"http://127.0.0.1:8000", b"https://helios.example.org"):  # the page's own, a trusted one
        communicator, connected, _ = await _connect(f"/ws/jobs/{job.pk}/", [cookie, host, (b"origin", origin)])
        assert connected, origin
        assert (await _receive(communicator))["seq"] == 1
        await communicator.disconnect()


async def test_an_unknown_job_or_path_is_closed_with_4404(maintainer):
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    for path in ("/ws/jobs/987654/", "/ws/jobs/99999999999999999999/", "/ws/nothing/", "/ws/jobs/x/"):
        assert await _close_code(path, [cookie, ORIGIN]) == 4404, path


async def test_the_server_pings_and_takes_the_pages_pong(maintainer, settings):
    settings.HELIOS_WS_PING_SECONDS = 0.2
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    communicator, connected, _ = await _connect("/ws/jobs/", [cookie, ORIGIN])
    assert (await _receive(communicator))["type"] == "snapshot"
    assert await _receive(communicator) == {"type": "ping", "interval": 0.2}
    await communicator.send_to(text_data=json.dumps({"type": "pong"}))
    assert await _receive(communicator) == {"type": "ping", "interval": 0.2}  # no error in between
    await communicator.disconnect()


async def test_it_replays_stored_events_then_sends_live_ones_in_order(maintainer):
    job = await _make_job(maintainer)
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    communicator, connected, _ = await _connect(f"/ws/jobs/{job.pk}/?after=1", [cookie, ORIGIN])
    assert connected
    assert [(await _receive(communicator))["seq"] for _ in range(2)] == [2, 3]
    layer = get_channel_layer()
    # A live batch that repeats an already-replayed event and skips one (4): 4 is refilled from the database.
    await database_sync_to_async(events.event_append)(job.pk, {"type": "progress", "done": 3, "total": 4})
    await layer.group_send(
        f"job.{job.pk}",
        {
            "type": "job.events",
            "events": [
                {"type": "progress", "seq": 3, "done": 2, "total": 4},
                {"type": "measurement", "seq": 5, "ms": 1.5},
            ],
        },
    )
    received = [await _receive(communicator) for _ in range(2)]
    assert [e["seq"] for e in received] == [4, 5]
    assert received[0]["type"] == "progress" and received[1]["type"] == "measurement"
    await communicator.disconnect()


async def test_bad_messages_get_an_error_naming_the_field_and_the_socket_stays_open(maintainer):
    job = await _make_job(maintainer)
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    communicator, connected, _ = await _connect(f"/ws/jobs/{job.pk}/?after=3", [cookie, ORIGIN])
    await communicator.send_to(text_data="not json")
    assert (await _receive(communicator))["field"] == "message"
    await communicator.send_to(text_data=json.dumps({"type": "explode"}))
    assert (await _receive(communicator))["field"] == "type"
    await communicator.send_to(text_data=json.dumps({"type": "resume", "after": -1}))
    assert (await _receive(communicator))["field"] == "after"
    await communicator.send_to(text_data=json.dumps({"type": "ping"}))
    assert (await _receive(communicator)) == {"type": "pong"}
    await communicator.send_to(text_data=json.dumps({"type": "resume", "after": 2}))
    assert (await _receive(communicator))["seq"] == 3
    assert await database_sync_to_async(JobEvent.objects.filter(job_id=job.pk).count)() == 3
    await communicator.disconnect()
