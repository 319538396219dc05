"""`/ws/recipes/`: every recipe's active policy, then each policy decision step and each change
of a recipe's policy (whatever made it) as it commits, so every open page stays true without a reload."""

from __future__ import annotations

from typing import Any

from heliosweb.realtime.streams import SnapshotStream

from .selectors import recipe_policies

GROUP = "recipes"


class RecipesConsumer(SnapshotStream):
    group = GROUP

    def snapshot(self) -> dict[str, Any]:
        return {"type": "snapshot", "recipes": recipe_policies()}

    async def recipes_decision(self, message: dict[str, Any]) -> None:
        await self.send_json({**message, "type": "decision"})

    async def recipes_policy(self, message: dict[str, Any]) -> None:
        await self.send_json({**message, "type": "policy"})
