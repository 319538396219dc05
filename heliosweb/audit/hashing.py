"""The audit chain's keyed hash (HMAC-SHA256), one definition for appending and verifying. Its key,
`settings.AUDIT_KEY`, lives outside the database: whoever can write the database but not read the
key cannot re-hash an edited chain so that it verifies.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC
from typing import Any

from django.conf import settings

GENESIS = "0" * 64  # the prev_hash of event #1


def canonical_json(payload: dict[str, Any]) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same event always serialises to the same text."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def event_payload(event: Any) -> dict[str, Any]:
    """Everything an audit row says, except its own hash and the previous one."""
    return {
        "seq": event.seq,
        "action": event.action,
        "actor_id": event.actor_id,
        "actor": event.actor_name,
        "client_addr": event.client_addr,
        "recipe": event.recipe_name,
        "object_type": event.object_type,
        "object_id": event.object_id,
        "before": event.before,
        "after": event.after,
        "reason": event.reason,
        # Microseconds, UTC: what the database gives back is what was hashed.
        "created_at": event.created_at.astimezone(UTC).isoformat(timespec="microseconds"),
    }


def event_hash(payload: dict[str, Any], prev_hash: str, key: bytes | None = None) -> str:
    secret = settings.AUDIT_KEY.encode("utf-8") if key is None else key
    return hmac.new(secret, (canonical_json(payload) + prev_hash).encode("utf-8"), hashlib.sha256).hexdigest()
