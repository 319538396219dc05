"""`/ws/recipes/<name>/live/?after=N`: a recipe's live telemetry frames, numbered, refilled from the
database after a reconnect, and its policy changes (messages `frames`, `policies`, `ping`).

Frames arrive through `heliosweb.realtime.broadcast`. The socket gets at most 30 messages a second
(`Pace`); what arrived while it waited goes in one `frames` message. A frame past the next expected
one, or a `resync`, refills the gap from the database, so the page never has a hole in its numbers.
The common case (the next frame, the pace allowing, nothing waiting) is written by the broadcast's
reader itself (`_take`), as published, with no task woken; the rest goes through the socket's queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from heliosweb.common.errors import NotFound
from heliosweb.realtime.broadcast import Message, subscribe
from heliosweb.realtime.streams import CLOSE_NOT_FOUND, Stream
from heliosweb.recipes.models import Recipe
from heliosweb.recipes.selectors import recipe_get, recipe_policy_changes, recipe_policy_get
from heliosweb.recipes.services import policy_topic

from .ingest import live_topic
from .selectors import frames_after

# Half again the 20 frames a second the live bench feeds (bench/engine_bench.py): at the feed's own
# rate a bucket emptied by one burst never refilled, and a fifth of all sends at 1,000 viewers went
# the slow way.
SEND_INTERVAL_S = 1 / 30
FRAMES_PER_MESSAGE = 100


@dataclass
class Pace:
    """One send per `interval` on average, at most two back to back (a GCRA token bucket of two): a
    strict gap carried every late arrival over to all later frames. It refills only while frames
    come slower than 1 / `interval` (hence SEND_INTERVAL_S shorter than the feed's)."""

    interval: float
    due: float = -math.inf  # when the next send is due at the steady rate

    def wait(self, now: float) -> float:
        """Seconds to wait before a send at `now`."""
        return max(0.0, self.due - self.interval - now)

    def spend(self, now: float) -> None:
        self.due = max(self.due, now) + self.interval


@functools.lru_cache(maxsize=4)
def frames_message(frame: str) -> str:
    """The `frames` message of one frame, built once per process: the reader offers the same text
    object to every socket in turn, so the cache entry is found by identity."""
    return '{"type": "frames", "frames": [' + frame + "]}"


class LiveConsumer(Stream):
    recipe: Recipe
    last_seq: int
    _exits: contextlib.AsyncExitStack | None = None
    _pump: asyncio.Task[None] | None = None
    _messages: asyncio.Queue[Message] | None = None  # set once the opening is sent: `_take` may then write

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pace = Pace(SEND_INTERVAL_S)
        self._sending = asyncio.Lock()  # one writer at a time: the reader's `_take` or the pump

    async def start(self) -> None:
        name = self.scope["url_route"]["kwargs"]["name"]
        after = await self.query_after()
        if after is None:
            return
        self.last_seq = after
        self._exits = contextlib.AsyncExitStack()
        # Subscribed before reading the database: nothing falls between the refill and live frames.
        messages = await self._exits.enter_async_context(
            subscribe(live_topic(name), policy_topic(name), take=self._take)
        )
        # One trip to the database thread for all a new viewer needs: hundreds of pages reconnecting
        # at once queue on that one thread, so each trip counts.
        opening = await database_sync_to_async(self._opening)(name)
        if opening is None:
            await self.refuse(CLOSE_NOT_FOUND)
            return
        policies, frames = opening
        await self.send_json(policies)
        await self._send_frames(frames)
        self._messages = messages
        self._pump = asyncio.get_running_loop().create_task(self._forward(messages))

    def _opening(self, name: str) -> tuple[dict[str, Any], list[str]] | None:
        """The recipe's policy changes and the frames after `last_seq` (None: no such recipe)."""
        try:
            self.recipe = recipe_get(name=name)
        except NotFound:
            return None
        return self._policies(), self._frames_after_last()

    async def disconnect(self, code: int) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        if self._exits is not None:
            await self._exits.aclose()
        await super().disconnect(code)

    async def _take(self, message: Message) -> bool:
        """Offered every message by the broadcast's reader first: write it now when it is the next
        frame, the pace allows a send and nothing is queued or being sent; else decline (False)."""
        data = message.data
        if (
            self._messages is None
            or self._sending.locked()
            or not self._messages.empty()
            or data["type"] != "frame"
            or data["seq"] != self.last_seq + 1
        ):
            return False
        now = asyncio.get_running_loop().time()
        if self._pace.wait(now):
            return False
        async with self._sending:
            self._pace.spend(now)
            self.last_seq = data["seq"]
            await self._send_text(frames_message(message.text))
        return True

    async def _forward(self, messages: asyncio.Queue[Message]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            pending = [await messages.get()]
            if wait := self._pace.wait(loop.time()):  # sent too often of late: what arrives meanwhile joins it
                await asyncio.sleep(wait)
            async with self._sending:
                self._pace.spend(loop.time())
                while not messages.empty():
                    pending.append(messages.get_nowait())
                frames: list[str] = []
                for message in pending:
                    kind = message.data["type"]
                    if kind == "frame":
                        frames.extend(await self._accept(message))
                    elif kind == "policy":
                        await self._send_policies()
                    else:  # resync: the broadcast lost messages
                        frames.extend(await self._missing())
                await self._send_frames(frames)

    async def _accept(self, message: Message) -> list[str]:
        """The frame's text when it is the next one; the gap up to it from the database when not."""
        seq = message.data["seq"]
        if seq <= self.last_seq:
            return []
        if seq > self.last_seq + 1:
            return await self._missing()
        self.last_seq = seq
        return [message.text]

    async def _missing(self) -> list[str]:
        return await database_sync_to_async(self._frames_after_last)()

    def _frames_after_last(self) -> list[str]:
        """The stored frames after `last_seq`, as JSON texts."""
        frames = frames_after(recipe=self.recipe, after=self.last_seq)
        if frames:
            self.last_seq = frames[-1]["seq"]
        return [json.dumps(frame) for frame in frames]

    async def _send_frames(self, frames: list[str]) -> None:
        """`frames` (JSON texts) in `frames` messages of at most FRAMES_PER_MESSAGE each."""
        for i in range(0, len(frames), FRAMES_PER_MESSAGE):
            await self._send_text(
                '{"type": "frames", "frames": [' + ", ".join(frames[i : i + FRAMES_PER_MESSAGE]) + "]}"
            )

    async def _send_text(self, text: str) -> None:
        """The ASGI send itself: channels' two `send` layers only wrap the text in this same event,
        and at 500 viewers every frame passes here 500 times on the broadcast's reader."""
        await self.base_send({"type": "websocket.send", "text": text})

    async def _send_policies(self) -> None:
        await self.send_json(await database_sync_to_async(self._policies)())

    def _policies(self) -> dict[str, Any]:
        name = self.recipe.name
        return {
            "type": "policies",
            "changes": recipe_policy_changes(name=name),
            "current": recipe_policy_get(name=name),
        }
