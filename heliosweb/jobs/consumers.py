"""The live stream of one job: stored events first (replay), then live ones, in number order.

Client messages (JSON): {"type": "resume", "after": n} replays from n; {"type": "ping"} -> pong.
Anything else gets {"type": "error", "field": ..., "error": ...} and the socket stays open.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from heliosweb.query import int_or_none
from heliosweb.streams import CLOSE_UNAUTHENTICATED, SnapshotStream

from . import selectors
from .services import LIST_GROUP, group_name

CLOSE_NOT_FOUND = 4404


class JobConsumer(AsyncWebsocketConsumer):
    job_id: int
    last_seq: int

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        if not await database_sync_to_async(selectors.job_exists)(job_id=self.job_id):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        after = int_or_none((query.get("after") or ["0"])[0])
        self.last_seq = after if after is not None and after >= 0 else 0
        # Join the group before reading the database, so nothing falls between replay and live.
        await self.channel_layer.group_add(group_name(self.job_id), self.channel_name)
        await self.accept()
        await self._replay(before=None)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "job_id"):
            await self.channel_layer.group_discard(group_name(self.job_id), self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            message = json.loads(text_data or "")
        except ValueError:
            await self._error("message", "not JSON")
            return
        if not isinstance(message, dict):
            await self._error("message", "must be a JSON object")
            return
        kind = message.get("type")
        if kind == "ping":
            await self.send(text_data=json.dumps({"type": "pong"}))
        elif kind == "resume":
            after = message.get("after")
            if not isinstance(after, int) or isinstance(after, bool) or after < 0:
                await self._error("after", "must be a non-negative integer")
                return
            self.last_seq = after
            await self._replay(before=None)
        else:
            await self._error("type", f"unknown message type {kind!r} (expected 'resume' or 'ping')")

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
        await self.send(text_data=json.dumps(event))
        self.last_seq = max(self.last_seq, event["seq"])

    async def _error(self, field: str, error: str) -> None:
        await self.send(text_data=json.dumps({"type": "error", "field": field, "error": error}))


class JobListConsumer(SnapshotStream):
    """`/ws/jobs/`: where every recent job stands, for the pages that list jobs."""

    group = LIST_GROUP

    def snapshot(self) -> dict[str, Any]:
        return {"type": "snapshot", "jobs": [selectors.job_as_api(j, full=False) for j in selectors.job_list(limit=50)]}

    async def jobs_status(self, message: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps({"type": "job", "job": message["job"]}))
