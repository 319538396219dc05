"""The live recipe websocket: a live frame is forwarded as the text it was published as (encoded
once per process) and reads the same as the stored frame; a gap or a resync refills from the
database; the send pace absorbs a late frame instead of delaying every frame after it."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from heliosweb.asgi import application
from heliosweb.realtime.broadcast import Message, publish
from heliosweb.telemetry import ingest as services
from heliosweb.telemetry.consumers import LiveConsumer, Pace
from heliosweb.telemetry.selectors import frames_after

from .conftest import ORIGIN, use_redis
from .telemetry_records import body, launch

INTERVAL = 0.05


def _session_cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def _open(user, name: str = "tiny-cpu") -> WebsocketCommunicator:
    cookie = await database_sync_to_async(_session_cookie)(user)
    communicator = WebsocketCommunicator(application, f"/ws/recipes/{name}/live/", headers=[cookie, ORIGIN])
    connected, _ = await communicator.connect()
    assert connected
    assert (await _receive(communicator))["type"] == "policies"
    return communicator


async def _receive(communicator: WebsocketCommunicator) -> dict:
    return json.loads(await communicator.receive_from(timeout=5))


def _ingest(recipe, batch: int) -> None:
    now = time.time() * 1000
    records = [
        launch(batch * 100 + i, t_ms=now - 10 + i, graph=2048, end=2000, padded=48, chooser="catalog", ms=3.0)
        for i in range(5)
    ]
    recipe.refresh_from_db()
    services.telemetry_ingest(recipe=recipe, data=body(records, batch))


def _stored(recipe) -> list[dict]:
    return frames_after(recipe=recipe, after=0)


async def _live_frame_reads_as_stored(recipe, maintainer) -> None:
    communicator = await _open(maintainer)
    await database_sync_to_async(_ingest)(recipe, 1)
    message = await _receive(communicator)
    [frame] = message["frames"]
    published_ms = frame.pop("published_ms")  # the live copy also says when it left the ingesting process
    assert isinstance(published_ms, float)
    assert message["type"] == "frames" and [frame] == await database_sync_to_async(_stored)(recipe)
    await communicator.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_live_frame_is_forwarded_as_published_and_reads_as_the_stored_frame(recipe, maintainer):
    await _live_frame_reads_as_stored(recipe, maintainer)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_live_frame_through_redis_reads_as_the_stored_frame(recipe, maintainer, redis_url, settings):
    use_redis(redis_url, settings)
    await _live_frame_reads_as_stored(recipe, maintainer)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_frame_past_a_gap_brings_the_missing_ones_from_the_database(recipe, maintainer, monkeypatch):
    communicator = await _open(maintainer)
    with monkeypatch.context() as lost:  # frame 1 is stored but its broadcast never arrives
        lost.setattr(services, "publish", lambda topic, message: None)
        await database_sync_to_async(_ingest)(recipe, 1)
    await database_sync_to_async(_ingest)(recipe, 2)
    message = await _receive(communicator)
    assert [f["seq"] for f in message["frames"]] == [1, 2]
    assert message["frames"] == await database_sync_to_async(_stored)(recipe)  # both refilled, as stored
    await database_sync_to_async(_ingest)(recipe, 3)  # and live again after the refill
    assert [f["seq"] for f in (await _receive(communicator))["frames"]] == [3]
    await communicator.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_resync_brings_what_the_broadcast_lost_from_the_database(recipe, maintainer, monkeypatch):
    communicator = await _open(maintainer)
    monkeypatch.setattr(services, "publish", lambda topic, message: None)
    await database_sync_to_async(_ingest)(recipe, 1)
    publish(services.live_topic("tiny-cpu"), {"type": "resync"})
    message = await _receive(communicator)
    assert message["frames"] == await database_sync_to_async(_stored)(recipe)
    await communicator.disconnect()


def test_the_pace_sends_two_back_to_back_then_one_per_interval():
    pace = Pace(INTERVAL)
    for _ in range(2):
        assert pace.wait(10.0) == 0
        pace.spend(10.0)
    assert pace.wait(10.0) == pytest.approx(INTERVAL)
    pace.spend(10.0 + INTERVAL)
    assert pace.wait(10.0 + INTERVAL) == pytest.approx(INTERVAL)
    assert pace.wait(60.0) == 0  # after a quiet spell: two back to back again, never more
    pace.spend(60.0)
    pace.spend(60.0)
    assert pace.wait(60.0) == pytest.approx(INTERVAL)


def test_a_frame_arriving_late_delays_none_of_the_frames_after_it():
    pace = Pace(INTERVAL)
    for t in (0.0, 0.05, 0.11, 0.15, 0.20, 0.25, 0.30):  # 20 frames a second, the third 10 ms late
        assert pace.wait(t) == 0  # a strict 50 ms gap would hold 0.15 until 0.16, 0.20 until 0.21, ...
        pace.spend(t)


@pytest.mark.asyncio
async def test_the_reader_writes_the_next_frame_itself_and_leaves_the_rest_to_the_queue():
    """`_take`, the broadcast reader's fast path: only the next frame in sequence, with the pace
    allowing a send and nothing queued or being sent, is written there and then."""
    consumer = LiveConsumer()
    consumer._pace = Pace(3600.0)  # a bucket of two, then nothing for an hour: no clock in the test
    consumer.last_seq = 4
    sent: list[str] = []

    async def send_text(text: str) -> None:
        sent.append(text)

    consumer._send_text = send_text  # type: ignore[method-assign]

    def frame(seq: int) -> Message:
        return Message.of_text(json.dumps({"type": "frame", "seq": seq}))

    assert not await consumer._take(frame(5))  # the opening is not sent yet: everything waits in the queue
    consumer._messages = asyncio.Queue()
    assert await consumer._take(frame(5)) and consumer.last_seq == 5
    assert not await consumer._take(frame(7))  # a gap: the pump refills it from the database
    assert not await consumer._take(Message.of_text('{"type": "policy"}'))
    await consumer._messages.put(frame(6))
    assert not await consumer._take(frame(6))  # something queued goes first
    consumer._messages.get_nowait()
    async with consumer._sending:
        assert not await consumer._take(frame(6))  # the pump is sending
    assert await consumer._take(frame(6))  # the bucket's second send
    assert not await consumer._take(frame(7))  # the pace: the pump sends it when due
    assert [json.loads(text) for text in sent] == [
        {"type": "frames", "frames": [{"type": "frame", "seq": 5}]},
        {"type": "frames", "frames": [{"type": "frame", "seq": 6}]},
    ]
    assert consumer.last_seq == 6
