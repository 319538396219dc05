"""The job websocket: authentication, origin check, bad messages, replay then live, gap refill."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from heliosweb.asgi import application
from heliosweb.jobs import services
from heliosweb.jobs.models import JobEvent

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


async def _make_job(maintainer):
    def create():
        job = services.job_create(kind="pr22", user=maintainer)
        for i in range(3):
            services._append_event(job.pk, {"type": "progress", "done": i, "total": 4, "message": f"step {i}"})
        return job

    return await database_sync_to_async(create)()


async def test_it_refuses_anonymous_clients(maintainer):
    job = await _make_job(maintainer)
    communicator, connected, _ = await _connect(f"/ws/jobs/{job.pk}/", [ORIGIN])
    assert not connected


async def test_it_refuses_a_foreign_or_missing_origin(maintainer):
    job = await _make_job(maintainer)
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    for headers in ([cookie], [cookie, (b"origin", b"http://evil.example")]):
        communicator, connected, _ = await _connect(f"/ws/jobs/{job.pk}/", headers)
        assert not connected


async def test_an_unknown_job_is_closed_with_4404(maintainer):
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    communicator, connected, code = await _connect("/ws/jobs/987654/", [cookie, ORIGIN])
    assert not connected and code == 4404


async def test_it_replays_stored_events_then_sends_live_ones_in_order(maintainer):
    job = await _make_job(maintainer)
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    communicator, connected, _ = await _connect(f"/ws/jobs/{job.pk}/?after=1", [cookie, ORIGIN])
    assert connected
    assert [(await _receive(communicator))["seq"] for _ in range(2)] == [2, 3]
    layer = get_channel_layer()
    # A live batch that repeats an already-replayed event and skips one (4): 4 is refilled from the database.
    await database_sync_to_async(services._append_event)(job.pk, {"type": "progress", "done": 3, "total": 4})
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
