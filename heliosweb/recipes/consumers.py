"""The live stream of policy decisions (`/ws/recipes/`): the dashboard's recipe table stays true
without a reload. A connect starts with a snapshot from the database (the source of truth), so a
reconnect after a Redis restart catches up; then each decision step arrives as it commits."""

from __future__ import annotations

import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from .selectors import recipe_policies

GROUP = "recipes"
CLOSE_UNAUTHENTICATED = 4401


class RecipesConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        await self.channel_layer.group_add(GROUP, self.channel_name)  # before the snapshot: nothing falls between
        await self.accept()
        await self.send(json.dumps({"type": "snapshot", "recipes": await database_sync_to_async(recipe_policies)()}))

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(GROUP, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        await self.send(json.dumps({"type": "error", "field": "message", "error": "this stream takes no messages"}))

    async def recipes_decision(self, message: dict[str, Any]) -> None:
        await self.send(json.dumps({**message, "type": "decision"}))
