"""The live stream of one job: stored events first (replay), then live ones, in number order.

Client messages (JSON): {"type": "resume", "after": n} replays from n; `ping` and `pong` as every
stream takes them (heliosweb.common.streams). Anything else gets {"type": "error", "field", "error"}.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async

from heliosweb.common.bounds import DB_INT_MAX
from heliosweb.common.inputs import int_or_none
from heliosweb.common.streams import CLOSE_NOT_FOUND, SnapshotStream, Stream

from . import selectors
from .services.events import LIST_GROUP, group_name


class JobConsumer(Stream):
    job_id: int
    last_seq: int

    async def start(self) -> None:
        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        if self.job_id > DB_INT_MAX or not await database_sync_to_async(selectors.job_exists)(job_id=self.job_id):
            await self.refuse(CLOSE_NOT_FOUND)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        self.last_seq = int_or_none((query.get("after") or ["0"])[0], minimum=0) or 0
        # Join the group before reading the database, so nothing falls between replay and live.
        self.group = group_name(self.job_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        self._joined = True
        await self._replay(before=None)

    async def on_message(self, kind: Any, message: dict[str, Any]) -> None:
        if kind != "resume":
            await self.error("type", f"unknown message type {kind!r} (expected 'resume', 'ping' or 'pong')")
            return
        after = message.get("after")
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            await self.error("after", "must be a non-negative integer")
            return
        self.last_seq = after
        await self._replay(before=None)

    async def on_tick(self) -> None:
        await self._replay(before=None)

    async def job_events(self, message: dict[str, Any]) -> None:
        for event in message["events"]:
            seq = event["seq"]
            if seq <= self.last_seq:
                continue  # already sent by the replay
            if seq > self.last_seq + 1:
                await self._replay(before=seq)  # a batch went missing: refill from the database
            await self._send_event(event)

    async def _replay(self, before: int | None) -> None:
        events = await database_sync_to_async(selectors.job_events)(
            job_id=self.job_id, after=self.last_seq, before=before
        )
        for event in events:
            await self._send_event(event)

    async def _send_event(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
        self.last_seq = max(self.last_seq, event["seq"])


class JobListConsumer(SnapshotStream):
    """`/ws/jobs/`: where every recent job stands, for the pages that list jobs."""

    group = LIST_GROUP

    def snapshot(self) -> dict[str, Any]:
        return {"type": "snapshot", "jobs": [selectors.job_as_api(j, full=False) for j in selectors.job_list(limit=50)]}

    async def jobs_status(self, message: dict[str, Any]) -> None:
        await self.send_json({"type": "job", "job": message["job"]})
