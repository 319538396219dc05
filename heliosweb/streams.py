"""Read-only live streams for logged-in users: a snapshot from the database on every connect (the
database is the source of truth, so a reconnect after a Redis restart catches up), then each
message of one channel-layer group as it arrives."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

CLOSE_UNAUTHENTICATED = 4401


class SnapshotStream(AsyncWebsocketConsumer):
    group: ClassVar[str]

    def snapshot(self) -> dict[str, Any]:
        """The current state as the first message (runs in a database thread)."""
        raise NotImplementedError

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        await self.channel_layer.group_add(self.group, self.channel_name)  # before the snapshot: nothing falls between
        await self.accept()
        await self.send(text_data=json.dumps(await database_sync_to_async(self.snapshot)()))

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        await self.send(
            text_data=json.dumps({"type": "error", "field": "message", "error": "this stream takes no messages"})
        )
