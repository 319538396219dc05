"""Reads for telemetry: engine tokens, recent batches (the live page's refill), rollups merged per
policy version (before/after panels), and the totals `/metrics` exports."""

from __future__ import annotations

from .models import EngineToken, token_hash


def engine_token_get(*, token: str) -> EngineToken | None:
    """The live token row for `token` (recipes prefetched), or None."""
    return EngineToken.objects.prefetch_related("recipes").filter(key_hash=token_hash(token), revoked_at=None).first()
