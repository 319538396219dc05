"""The one way any app pushes to websockets (Zulip's `send_event` is the model).

Best effort: the database is the source of truth, so a failed send is logged, never raised, and
every stream refills what it missed from the database. Inside a transaction use
`send_event_on_commit`, so a listener told "done" finds it done.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from heliosweb.common.redis_errors import redis_refusal

log = logging.getLogger(__name__)


def send_event(group: str, message: dict[str, Any]) -> bool:
    """Send `message` (its `type` names the consumer method) to every socket in `group`; False if not sent."""
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception as exc:
        # Redis refusing writes lasts (until its disk has room): one line a send, not a traceback.
        refusal = redis_refusal(exc)
        log.warning(
            "could not send a %s message to channel group %s%s",
            message.get("type"),
            group,
            f": {refusal}" if refusal else "",
            exc_info=refusal is None,
        )
        return False
    return True


def send_event_on_commit(group: str, message: dict[str, Any]) -> None:
    """`send_event` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: send_event(group, message))
