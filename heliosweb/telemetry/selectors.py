"""Reads for telemetry: engine tokens, recent batches (the live page's refill), rollups merged per
policy version (before/after panels), and the totals `/metrics` exports."""

from __future__ import annotations

from typing import Any

from heliosweb.recipes.models import Recipe

from . import buckets
from .models import EngineToken, Rollup, TelemetryBatch, token_hash

MAX_REFILL_FRAMES = 600  # what a (re)connecting live page is sent at most: its rolling window
MIN_SAMPLES = 30  # finished requests below which a before/after figure is marked "too few samples"


def engine_token_get(*, token: str) -> EngineToken | None:
    """The live token row for `token` (recipes prefetched), or None."""
    return EngineToken.objects.prefetch_related("recipes").filter(key_hash=token_hash(token), revoked_at=None).first()


def frames_after(*, recipe: Recipe, after: int, limit: int = MAX_REFILL_FRAMES) -> list[dict[str, Any]]:
    """Stored live frames numbered above `after`, oldest first; at most the newest `limit` of them."""
    rows = TelemetryBatch.objects.filter(recipe=recipe, seq__gt=after).order_by("-seq").values_list("frame", flat=True)
    return [{"type": "frame", **f} for f in reversed(list(rows[:limit]))]


def version_summary(*, recipe: Recipe, version: int) -> dict[str, Any]:
    """One policy version's telemetry, every engine merged: TTFT p50/p99 (from the fixed buckets),
    launches per request, padding share, distinct prefill sequences per prompt length, and the
    sample counts each figure rests on."""
    rows = list(Rollup.objects.filter(recipe=recipe, version=version))
    ttft = buckets.empty()
    sequences: dict[str, set[str]] = {}
    for r in rows:
        buckets.add(ttft, r.ttft_buckets)
        for length, seqs in r.sequences.items():
            sequences.setdefault(length, set()).update(seqs)
    requests = sum(r.requests for r in rows)
    launched = sum(r.launched_tokens for r in rows)
    distinct = [len(s) for s in sequences.values()]
    return {
        "version": version,
        "policy": rows[0].policy if rows else None,
        "requests": requests,
        "launches": sum(r.prefill_launches for r in rows),
        "ttft_p50_ms": _round(buckets.quantile_ms(ttft, 0.5)),
        "ttft_p99_ms": _round(buckets.quantile_ms(ttft, 0.99)),
        "launches_per_request": _round(sum(r.request_launches for r in rows) / requests) if requests else None,
        "padding_share": _round(sum(r.padded_tokens for r in rows) / launched) if launched else None,
        "prompt_lengths": len(distinct),
        "sequences_per_length_max": max(distinct, default=None),
        "deterministic_lengths": sum(1 for n in distinct if n == 1),
        "too_few": requests < MIN_SAMPLES,
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
