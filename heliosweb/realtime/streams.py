"""What every websocket of the project shares: refusals a page can read, a keep-alive ping, and
bounded JSON messages. A refusal accepts the handshake, then closes with a code (4401 not logged
in, 4404 no such stream): a browser sees only 1006 for a refused handshake, and would retry forever.
Every `HELIOS_WS_PING_SECONDS` the server pings; pages answer `pong` and reconnect when the server
stays silent. Client messages are bounded JSON objects; anything else gets `{"type": "error",
"field", "error"}`, the socket kept open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from heliosweb.common.bounds import BadJSON, parse_json
from heliosweb.common.inputs import int_or_none

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_FOUND = 4404
MAX_MESSAGE_BYTES = 4096
REJOIN_SECONDS = 1.0  # a socket that could not join its group: a join and a catch-up this often


class Stream(AsyncWebsocketConsumer):
    """A logged-in user's websocket. Subclasses implement `start` (join groups, send the first
    messages, or `refuse(CLOSE_NOT_FOUND)`) and `on_message` for the message types they take."""

    group: str | None = None  # the channel-layer group the stream follows, if any
    _pinger: asyncio.Task[None] | None = None
    _joined: bool = False
    _refused: bool = False

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if self.group:
            # Join before the first message: nothing falls between the snapshot and live messages.
            await self.join()
        await self.start()
        if not self._refused:
            self._pinger = asyncio.get_running_loop().create_task(self._ping_forever())

    async def start(self) -> None:
        """Send what a new client needs first."""

    async def join(self) -> bool:
        """Join `group` for live messages. If Redis refuses (MISCONF) the socket is still served, from
        the database (`on_tick`, a join tried every `REJOIN_SECONDS`), instead of closed 1011."""
        assert self.group is not None
        try:
            await self.channel_layer.group_add(self.group, self.channel_name)
        except Exception as exc:
            log.warning("%s: cannot join %s (%s); serving from the database", type(self).__name__, self.group, exc)
            return False
        self._joined = True
        return True

    async def query_after(self) -> int | None:
        """The connect URL's `?after=` (0 when absent): a non-negative integer in decimal digits, or
        None once an error naming `after` is sent and the socket refused (4400), never read leniently."""
        raw = parse_qs(self.scope.get("query_string", b"").decode()).get("after", [""])[0]
        after = int_or_none(raw or "0", minimum=0)
        if after is None:
            await self.error("after", f"must be a non-negative integer, got {raw[:40]!r}")
            await self.refuse(CLOSE_BAD_REQUEST)
        return after

    async def refuse(self, code: int) -> None:
        self._refused = True
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        if self._pinger is not None:
            self._pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pinger
        if self._joined and self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def _ping_forever(self) -> None:
        interval = settings.HELIOS_WS_PING_SECONDS
        loop = asyncio.get_running_loop()
        pinged = loop.time()
        while True:
            unjoined = self.group is not None and not self._joined
            await asyncio.sleep(min(interval, REJOIN_SECONDS) if unjoined else interval)
            if loop.time() - pinged >= interval * 0.99:
                pinged = loop.time()
                await self.send_json({"type": "ping", "interval": interval})
            try:
                if unjoined and await self.join():
                    await self.on_rejoined()
                await self.on_tick()
            except Exception:  # a failed catch-up (database busy, restarting) must not end the pings
                log.warning(
                    "%s: catch-up on ping failed; retrying at the next ping", type(self).__name__, exc_info=True
                )

    async def on_rejoined(self) -> None:
        """Live messages flow again after a join that failed at connect: send what was missed."""

    async def on_tick(self) -> None:
        """Each ping: a stream that keeps its history in the database catches up on what the live
        path lost (a Redis restart can leave a process's channel-layer receive deaf)."""

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is None or len(text_data.encode()) > MAX_MESSAGE_BYTES:
            await self.error("message", f"must be a JSON text message of at most {MAX_MESSAGE_BYTES} bytes")
            return
        try:
            message = parse_json(text_data, root="message")
        except BadJSON as exc:
            await self.error(exc.field, exc.message)
            return
        if not isinstance(message, dict):
            await self.error("message", "must be a JSON object")
            return
        kind = message.get("type")
        if kind == "ping":
            await self.send_json({"type": "pong"})
        elif kind != "pong":  # a page's answer to our ping: the connection is alive, nothing to do
            await self.on_message(kind, message)

    async def on_message(self, kind: Any, message: dict[str, Any]) -> None:
        await self.error("type", f"unknown message type {kind!r} (this stream takes only 'ping' and 'pong')")

    async def send_json(self, content: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(content))

    async def error(self, field: str, error: str) -> None:
        await self.send_json({"type": "error", "field": field, "error": error})


class SnapshotStream(Stream):
    """Read-only live streams: a snapshot from the database (the source of truth) on every connect,
    so a reconnect after a Redis restart catches up, then each message of `group`."""

    def snapshot(self) -> dict[str, Any]:
        """The current state as the first message (runs in a database thread)."""
        raise NotImplementedError

    async def start(self) -> None:
        await self.send_json(await database_sync_to_async(self.snapshot)())

    async def on_rejoined(self) -> None:
        await self.start()


class UnknownStream(Stream):
    """Any websocket path no route names: closed with 4404 (it answered HTTP 500)."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)
