"""One Redis pub/sub subscription per web process, fanned out in-process to whoever waits here.

Not a channel-layer group per stream: with the stock layers every consumer wakes for every event,
the Redis layer drops events past its `capacity`, and redis-py's async pool stops at 100
connections; 200 followers of one stream saw p95 7.7 s, one reader per process held 30 ms at 200
and 77 ms at 500 (docs/architecture.md). Each process's reader decodes a message once and hands
every local `subscribe(topic)` queue a `Message` with its JSON text, never encoded again per socket.
Long-polling engines and live pages wait here without a thread or a database connection. `take`,
offered each message first, lets a live socket write it at once instead of waking a task per socket
(at 500 viewers those wake-ups put the reader behind the frames); what it declines is queued.

Best effort (the database is the source of truth): an overflowing queue, or every one after the
reader lost Redis, gets `{"type": "resync"}`. Without `REDIS_URL`, delivery is in-process only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio as aioredis
from django.conf import settings

log = logging.getLogger(__name__)

PREFIX = "helios:"
QUEUE_LIMIT = 1_000  # messages a slow subscriber may fall behind before it is told to resync
READY_TIMEOUT_S = 2.0
_RETRY_S = (0.1, 0.5, 1.0, 2.0)


@dataclass(frozen=True, slots=True)
class Message:
    """One published message as subscribers get it: `data` parsed once per process and shared by
    every subscriber (read it, never change it), and `text`, its JSON as published."""

    data: dict[str, Any]
    text: str

    @classmethod
    def of_text(cls, text: str) -> Message:
        return cls(json.loads(text), text)


RESYNC = Message.of_text('{"type": "resync"}')


def publish(topic: str, message: dict[str, Any]) -> None:
    """Send `message` to every subscriber of `topic` in every web process (best effort)."""
    text = json.dumps(message)
    if not settings.REDIS_URL:  # delivered as Redis would: decoded from the text, not the caller's dict
        _hub.deliver(topic, Message.of_text(text))
        return
    try:
        _sync_client().publish(PREFIX + topic, text)
    except redis.RedisError as exc:
        log.warning("publish to %s failed (%s); subscribers will catch up from the database", topic, exc)


_clients: dict[str, redis.Redis] = {}
_clients_lock = threading.Lock()


def _sync_client() -> redis.Redis:
    """One connection pool per Redis URL for this process (thread-safe, like redis-py's pools)."""
    url = settings.REDIS_URL
    with _clients_lock:
        if url not in _clients:
            _clients[url] = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        return _clients[url]


Take = Callable[[Message], Awaitable[bool]]


@contextlib.asynccontextmanager
async def subscribe(*topics: str, take: Take | None = None) -> AsyncIterator[asyncio.Queue[Message]]:
    """A queue of what is published to `topics` while the block runs (with `take`, what it declines)."""
    queue: asyncio.Queue[Message] = asyncio.Queue(QUEUE_LIMIT)
    for topic in topics:
        await _hub.add(topic, queue, take)
    try:
        yield queue
    finally:
        for topic in topics:
            _hub.remove(topic, queue)


class _Hub:
    """This process's subscribers, and the one reader task that feeds them (on the server's loop)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.topics: dict[str, dict[asyncio.Queue[Message], Take | None]] = {}
        self.reader: asyncio.Task[None] | None = None
        self.ready: asyncio.Event | None = None

    async def add(self, topic: str, queue: asyncio.Queue[Message], take: Take | None = None) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self.loop:  # a new server loop (or a test's): start over on it
            self.loop, self.topics, self.ready = loop, {}, asyncio.Event()
            self.reader = loop.create_task(self._read()) if settings.REDIS_URL else None
            if self.reader is None:
                self.ready.set()
        self.topics.setdefault(topic, {})[queue] = take
        assert self.ready is not None
        # Subscribed in Redis before the caller reads the database; if Redis is down, go on: the
        # reader tells every subscriber to resync once it is back.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.ready.wait()), READY_TIMEOUT_S)

    def remove(self, topic: str, queue: asyncio.Queue[Message]) -> None:
        queues = self.topics.get(topic)
        if queues is not None:
            queues.pop(queue, None)
            if not queues:
                del self.topics[topic]

    def deliver(self, topic: str, message: Message) -> None:
        """Thread-safe: hand `message` to the loop that owns the subscribers."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self._fan_out(topic, message), loop)

    async def _fan_out(self, topic: str, message: Message) -> None:
        for queue, take in tuple(self.topics.get(topic, {}).items()):
            if take is not None:
                try:
                    if await take(message):
                        continue
                except Exception:  # a socket closing under us: the queue (and its owner's cleanup) decides
                    log.debug("broadcast: take declined by error on %s", topic, exc_info=True)
            _put(queue, message)

    def _resync_all(self) -> None:
        for queues in self.topics.values():
            for queue in queues:
                _put(queue, RESYNC)

    async def _read(self) -> None:
        """Hold one pattern subscription; on a lost connection, reconnect and tell everyone to resync."""
        attempt = 0
        while True:
            client = aioredis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.psubscribe(PREFIX + "*")
                    assert self.ready is not None
                    if attempt:
                        self._resync_all()
                    self.ready.set()
                    attempt = 0
                    async for raw in pubsub.listen():
                        if raw.get("type") != "pmessage":
                            continue
                        topic = raw["channel"].decode()[len(PREFIX) :]
                        await self._fan_out(topic, Message.of_text(raw["data"].decode()))
            except asyncio.CancelledError:
                raise
            except (redis.RedisError, OSError) as exc:
                log.warning("broadcast reader lost Redis (%s); reconnecting", exc)
            finally:
                await client.aclose()
            await asyncio.sleep(_RETRY_S[min(attempt, len(_RETRY_S) - 1)])
            attempt += 1


def _put(queue: asyncio.Queue[Message], message: Message) -> None:
    try:
        queue.put_nowait(message)
    except asyncio.QueueFull:
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(RESYNC)


_hub = _Hub()
