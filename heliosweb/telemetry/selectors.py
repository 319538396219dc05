"""Reads for telemetry: engine tokens, recent batches (the live page's refill), rollups merged per
policy version (before/after panels), the totals `/metrics` exports, and launch or request records
over a time window (the trace export, the counterfactual replay)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from heliosweb.common.tokens import token_digest
from heliosweb.recipes.models import Recipe

from . import buckets
from .models import EngineToken, Rollup, TelemetryBatch, Totals

MAX_REFILL_FRAMES = 600  # what a (re)connecting live page is sent at most: its rolling window
MIN_SAMPLES = 30  # finished requests below which a before/after figure is marked "too few samples"


@dataclass(frozen=True)
class EngineGrant:
    """What a live engine token allows: its engine's name and the recipes it names."""

    engine: str
    recipes: frozenset[str]


# key hash -> (monotonic time checked, grant): live tokens read within the bound, so unknown ones
# cannot grow it.
_checked: dict[str, tuple[float, EngineGrant]] = {}
_clock = time.monotonic  # the tests move it


def engine_grant_get(*, token: str) -> EngineGrant | None:
    """What `token` allows, or None for an unknown or revoked one. A live token is trusted for
    HELIOS_ENGINE_TOKEN_CACHE_SECONDS after it was read (its 2 queries were a sixth of a small batch)."""
    key = token_digest(token)
    now, bound = _clock(), settings.HELIOS_ENGINE_TOKEN_CACHE_SECONDS
    hit = _checked.get(key)
    if hit is not None and now - hit[0] < bound:
        return hit[1]
    # A copy of the items (taken in one step): requests check tokens in threads of their own, and
    # iterating the dict itself while another thread adds to it raises RuntimeError.
    for old in [k for k, (checked, _) in tuple(_checked.items()) if now - checked >= bound]:
        _checked.pop(old, None)  # tokens no longer used (a simulated engine's, one per job) leave
    row = EngineToken.objects.prefetch_related("recipes").filter(key_hash=key, revoked_at=None).first()
    if row is None:
        return None
    grant = EngineGrant(row.engine, frozenset(r.name for r in row.recipes.all()))
    _checked[key] = (now, grant)
    return grant


def frames_after(*, recipe: Recipe, after: int, limit: int = MAX_REFILL_FRAMES) -> list[dict[str, Any]]:
    """Stored live frames numbered above `after`, oldest first; at most the newest `limit` of them."""
    rows = TelemetryBatch.objects.filter(recipe=recipe, seq__gt=after).order_by("-seq").values_list("frame", flat=True)
    return [{"type": "frame", **f} for f in reversed(list(rows[:limit]))]


def version_summary(*, recipe: Recipe, version: int, policy: str | None) -> dict[str, Any]:
    """One policy version's telemetry, engines merged, with the sample counts each figure rests on.
    `policy` is the version's (the audit chain's), so the panel names it before any engine reports."""
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
        "policy": policy if policy is not None else (rows[0].policy if rows else None),
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


def telemetry_by_version(*, recipe: Recipe) -> list[dict[str, Any]]:
    """What the recipe's engines reported per policy version, oldest first, engines merged, from the
    never-pruned totals: engines, requests, launches (and per request), TTFT p50/p99 (within a
    bucket step) and mean, launched and padded tokens and share, and whether the sample is small."""
    merged: dict[int, dict[str, Any]] = {}
    for t in Totals.objects.filter(recipe=recipe).order_by("version", "engine"):
        row = merged.setdefault(
            t.version,
            {"policy": t.policy, "engines": [], "ttft": buckets.empty(), "ttft_sum_ms": 0.0, "requests": 0,
             "request_launches": 0, "prefill_launches": 0, "launched_tokens": 0, "padded_tokens": 0},
        )  # fmt: skip
        row["engines"].append(t.engine)
        buckets.add(row["ttft"], t.ttft_buckets)
        row["ttft_sum_ms"] += t.ttft_sum_ms
        for field in ("requests", "request_launches", "prefill_launches", "launched_tokens", "padded_tokens"):
            row[field] += getattr(t, field)
    out = []
    for version, row in merged.items():
        requests, launched = row["requests"], row["launched_tokens"]
        out.append(
            {
                "version": version,
                "policy": row["policy"],
                "engines": row["engines"],
                "requests": requests,
                "launches": row["prefill_launches"],
                "launches_per_request": _round(row["request_launches"] / requests) if requests else None,
                "ttft_p50_ms": _round(buckets.quantile_ms(row["ttft"], 0.5)),
                "ttft_p99_ms": _round(buckets.quantile_ms(row["ttft"], 0.99)),
                "ttft_mean_ms": _round(row["ttft_sum_ms"] / requests) if requests else None,
                "launched_tokens": launched,
                "padded_tokens": row["padded_tokens"],
                "padding_share": _round(row["padded_tokens"] / launched) if launched else None,
                "padding_percent": round(100 * row["padded_tokens"] / launched, 1) if launched else None,
                "too_few": requests < MIN_SAMPLES,
            }
        )
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def raw_records(
    *, recipe: Recipe, since_ms: float, until_ms: float, engine: str | None, most: int, of: str = "launch"
) -> list[tuple[str, dict[str, Any]]]:
    """(engine, record of type `of`) with `since_ms <= t_ms < until_ms`, from the raw batches still
    kept, in time order; at most `most + 1`, so a caller can tell the window holds more. Batches are
    chosen by receipt: received before the window, or a minute past its end, they hold none of it."""
    since, until = _datetime_of(since_ms), _datetime_of(until_ms + 60_000)
    batches = TelemetryBatch.objects.filter(recipe=recipe, received_at__gte=since, received_at__lte=until)
    if engine is not None:
        batches = batches.filter(engine=engine)
    found: list[tuple[str, dict[str, Any]]] = []
    for name, records in batches.order_by("received_at", "pk").values_list("engine", "records").iterator(chunk_size=20):
        found += [(name, r) for r in records if r["type"] == of and since_ms <= r["t_ms"] < until_ms]
        if len(found) > most:
            break
    found.sort(key=lambda pair: pair[1]["t_ms"])
    return found[: most + 1]


def _datetime_of(unix_ms: float) -> datetime:
    return datetime.fromtimestamp(unix_ms / 1000.0, tz=UTC)
