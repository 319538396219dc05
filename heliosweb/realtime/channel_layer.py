"""The Redis channel layer every process uses (`settings.redis_channel_layer`): channels_redis's,
whose `receive` waits out Redis refusing writes instead of raising into the consumer. A consumer
reads its channel through a Lua script that writes (a backup of the message); with Redis refusing
writes (`MISCONF`) that raised in the dispatch loop and closed every socket 1011. Now the read is
retried every `RETRY_S`, the socket served from the database meanwhile (`realtime.streams`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import redis
from channels_redis.core import RedisChannelLayer as BaseRedisChannelLayer

from heliosweb.common.redis_errors import redis_refusal

log = logging.getLogger(__name__)

RETRY_S = 1.0


class RedisChannelLayer(BaseRedisChannelLayer):
    async def receive(self, channel: str) -> Any:
        warned = False
        while True:
            try:
                return await super().receive(channel)
            except redis.ResponseError as exc:
                refusal = redis_refusal(exc)
                if refusal is None:
                    raise
                if not warned:
                    log.warning("channel layer: cannot read %s (%s); retrying every %g s", channel, refusal, RETRY_S)
                    warned = True
                await asyncio.sleep(RETRY_S)
