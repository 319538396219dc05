"""The live stream of one job: stored events first (replay), then live ones, in number order.

Client messages (JSON): {"type": "resume", "after": n} replays from n; `ping` and `pong` as every
stream takes them (heliosweb.realtime.streams). Anything else gets {"type": "error", "field", "error"}.
"""

from __future__ import annotations

import asyncio
from typing import Any

from channels.db import database_sync_to_async

from heliosweb.common.bounds import DB_INT_MAX
from heliosweb.realtime.streams import CLOSE_NOT_FOUND, SnapshotStream, Stream

from . import selectors
from .services.events import LIST_GROUP, group_name


class JobConsumer(Stream):
    """Each event once, in number order: the live batches, the replay on connect or `resume` and
    the catch-up at each ping all go through one lock and skip what the socket already got (the
    catch-up, reading the database while a live batch was sent, re-sent events out of order)."""

    job_id: int
    last_seq: int
    _sending: asyncio.Lock

    async def start(self) -> None:
        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        if self.job_id > DB_INT_MAX or not await database_sync_to_async(selectors.job_exists)(job_id=self.job_id):
            await self.refuse(CLOSE_NOT_FOUND)
            return
        after = await self.query_after()
        if after is None:
            return
        self.last_seq = after
        self._sending = asyncio.Lock()
        # Join the group before reading the database, so nothing falls between replay and live.
        self.group = group_name(self.job_id)
        await self.join()  # refused (Redis refusing writes): served from the database until it joins
        async with self._sending:
            await self._replay(before=None)

    async def on_message(self, kind: Any, message: dict[str, Any]) -> None:
        if kind != "resume":
            await self.error("type", f"unknown message type {kind!r} (expected 'resume', 'ping' or 'pong')")
            return
        after = message.get("after")
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            await self.error("after", "must be a non-negative integer")
            return
        async with self._sending:
            self.last_seq = after  # the client asks again from there: what follows is sent anew
            await self._replay(before=None)

    async def on_tick(self) -> None:
        async with self._sending:
            await self._replay(before=None)

    async def job_events(self, message: dict[str, Any]) -> None:
        async with self._sending:
            for event in message["events"]:
                seq = event["seq"]
                if seq > self.last_seq + 1:
                    await self._replay(before=seq)  # a batch went missing: refill from the database
                await self._send_event(event)

    async def _replay(self, before: int | None) -> None:
        """Stored events after the last one sent (and before `before`); the caller holds the lock."""
        events = await database_sync_to_async(selectors.job_events)(
            job_id=self.job_id, after=self.last_seq, before=before
        )
        for event in events:
            await self._send_event(event)

    async def _send_event(self, event: dict[str, Any]) -> None:
        if event["seq"] <= self.last_seq:
            return  # already sent
        await self.send_json(event)
        self.last_seq = event["seq"]


class JobListConsumer(SnapshotStream):
    """`/ws/jobs/`: where every recent job stands, for the pages that list jobs."""

    group = LIST_GROUP

    def snapshot(self) -> dict[str, Any]:
        return {"type": "snapshot", "jobs": [selectors.job_as_api(j, full=False) for j in selectors.job_list(limit=50)]}

    async def jobs_status(self, message: dict[str, Any]) -> None:
        await self.send_json({"type": "job", "job": message["job"]})
