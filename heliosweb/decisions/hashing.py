"""The audit chain's hash: one definition, used when appending and when verifying."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC
from typing import Any

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
        "recipe_id": event.recipe_id,
        "recipe": event.recipe_name,
        "decision_id": event.decision_id,
        "before": event.before,
        "after": event.after,
        "reason": event.reason,
        # Microseconds, UTC: what the database gives back is what was hashed.
        "created_at": event.created_at.astimezone(UTC).isoformat(timespec="microseconds"),
    }


def event_hash(payload: dict[str, Any], prev_hash: str) -> str:
    return hashlib.sha256((canonical_json(payload) + prev_hash).encode("utf-8")).hexdigest()
