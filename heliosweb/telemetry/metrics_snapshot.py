"""`/metrics` answered from a snapshot made off the request path.

Computing the exposition (`metrics.exposition`, which the callers pass) costs 20-40 ms of CPU with 100 engines x 20
versions stored; on a loaded host a scrape waited several times that for a core (164-272 ms at load
14 on 2 cores). Beat has it made every `HELIOS_METRICS_SNAPSHOT_SECONDS` (10) and kept in the
default cache (Redis: every web process serves the same one) for three periods; a scrape serves it
while it is kept, and computes afresh when it is not (beat stopped, Redis away, snapshots off with
0). A scrape is thus at most one period behind the database: counters are read as they stood then,
never lower than an earlier scrape's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis
from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)
KEY = "helios:metrics-snapshot"


def snapshot_store(exposition: Callable[[], bytes]) -> int:
    """Make the exposition now and keep it for three periods; its size in bytes (0: snapshots off)."""
    period = settings.HELIOS_METRICS_SNAPSHOT_SECONDS
    if period <= 0:
        return 0
    text = exposition()
    cache.set(KEY, text, timeout=3 * period)
    return len(text)


def served_exposition(exposition: Callable[[], bytes]) -> bytes:
    """The kept snapshot when there is one, else `exposition()` computed now."""
    if settings.HELIOS_METRICS_SNAPSHOT_SECONDS > 0:
        try:
            kept = cache.get(KEY)
        except redis.RedisError as exc:
            log.warning("metrics snapshot unavailable, computing the exposition: %s", exc)
            kept = None
        if isinstance(kept, bytes):
            return kept
    return exposition()
