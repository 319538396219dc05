"""Row 25 of issue 18: each event once. 20 clients follow one fast job stream while the catch-up
(each ping) runs often; every client gets 1..last exactly once, in order. A real job (its event
pump in its own thread) and the Redis channel layer, as in production."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from heliosweb.asgi import application
from heliosweb.jobs import selectors
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.jobs.services import runner, submission

from .conftest import ORIGIN, use_redis

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

CLIENTS = 20


def _session_cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def _follow(communicator: WebsocketCommunicator) -> list[int]:
    """Every event number the client receives until the job's terminal event."""
    seqs: list[int] = []
    while True:
        message = json.loads(await communicator.receive_from(timeout=30))
        if message["type"] in ("ping", "pong"):
            continue
        seqs.append(message["seq"])
        if message["type"] in ("done", "failed", "cancelled"):
            return seqs


def slow_reads(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The catch-up's database read takes `seconds` more, as on a loaded database: live batches
    arrive while its answer is on the way (the window in which it re-sent what they had delivered,
    out of order; with these figures the old consumer failed this test in 2 runs of 3)."""
    original = selectors.job_events

    def job_events(**kwargs):
        found = original(**kwargs)
        time.sleep(seconds)
        return found

    monkeypatch.setattr(selectors, "job_events", job_events)


async def test_twenty_clients_on_one_fast_stream_get_each_event_once(maintainer, settings, redis_url, monkeypatch):
    use_redis(redis_url, settings)
    settings.HELIOS_WS_PING_SECONDS = 0.1  # a catch-up every 100 ms, racing the live batches
    slow_reads(monkeypatch, 0.03)
    settings.HELIOS_EVENT_FLUSH_SECONDS = 0.01  # a live batch every 10 ms: several land during each read
    job = await database_sync_to_async(submission.job_create)(
        kind="pulse", params={"count": 2000, "rate": 1000.0}, user=None
    )
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    clients = []
    for _ in range(CLIENTS):
        communicator = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=[cookie, ORIGIN])
        connected, _ = await communicator.connect(timeout=30)
        assert connected
        clients.append(communicator)
    followers = [asyncio.ensure_future(_follow(c)) for c in clients]
    await sync_to_async(runner.job_run, thread_sensitive=False)(job_id=job.pk)
    received = await asyncio.gather(*followers)
    stored = await database_sync_to_async(BenchmarkJob.objects.get)(pk=job.pk)
    assert stored.status == "done", stored.error
    expected = list(range(1, stored.last_seq + 1))
    repeats = [len(seqs) - len(set(seqs)) for seqs in received]
    assert repeats == [0] * CLIENTS, f"events received twice, per client: {repeats}"
    assert all(seqs == expected for seqs in received)
    for communicator in clients:
        await communicator.disconnect()
