"""Row 24 of issue 18: while Redis refuses writes (its disk failing: MISCONF), a new job websocket
is accepted and served from the database; once Redis writes again, live events resume on it. A
real Redis of its own (its data directory removed under it, as in test_redis_refuses_writes.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis as redis_client
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from heliosweb.asgi import application
from heliosweb.devtool import start_redis
from heliosweb.jobs.services import events, submission

from .conftest import ORIGIN, use_redis, wait_until
from .test_redis_refuses_writes import disk_back, disk_fails, writable

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def _session_cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def _next_event(communicator: WebsocketCommunicator, timeout: float = 10) -> dict:
    while True:
        message = json.loads(await communicator.receive_from(timeout=timeout))
        if message["type"] not in ("ping", "pong"):
            return message


async def test_a_new_job_socket_is_served_while_redis_refuses_writes(maintainer, settings, tmp_path: Path):
    proc, url = start_redis(tmp_path / "redis")
    r = redis_client.Redis.from_url(url)
    try:
        use_redis(url, settings)
        settings.HELIOS_WS_PING_SECONDS = 5
        job = await database_sync_to_async(submission.job_create)(kind="pr22", user=maintainer)
        await database_sync_to_async(events.event_append)(job.pk, {"type": "log", "message": "before"})
        cookie = await database_sync_to_async(_session_cookie)(maintainer)
        await database_sync_to_async(disk_fails)(r, tmp_path)
        await database_sync_to_async(wait_until)(lambda: not writable(r), timeout=30, what="Redis to refuse writes")

        communicator = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=[cookie, ORIGIN])
        connected, _ = await communicator.connect(timeout=10)
        assert connected
        assert (await _next_event(communicator))["seq"] == 1  # the replay
        await database_sync_to_async(events.event_append)(job.pk, {"type": "log", "message": "during"})
        start = time.monotonic()
        during = await _next_event(communicator)  # from the database: the live send was refused
        print(f"drill: an event reached the new socket from the database in {time.monotonic() - start:.1f} s")
        assert (during["seq"], during["message"]) == (2, "during")

        await database_sync_to_async(disk_back)(r, tmp_path)
        await database_sync_to_async(wait_until)(lambda: writable(r), timeout=30, what="Redis to write again")
        await database_sync_to_async(time.sleep)(2.5)  # the socket's next join attempt
        await database_sync_to_async(events.event_append)(job.pk, {"type": "log", "message": "after"})
        start = time.monotonic()
        after = await _next_event(communicator, timeout=2)  # live again: well before the next ping's catch-up
        assert (after["seq"], after["message"]) == (3, "after")
        print(f"drill: live again after Redis wrote again: {time.monotonic() - start:.2f} s")
        await communicator.disconnect()
    finally:
        proc.kill()  # refusing to save, Redis would not stop on SIGTERM
        proc.wait(timeout=10)
