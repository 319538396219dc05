"""`/metrics` answered from a snapshot made off the request path: the exposition costs 20-40 ms of
CPU (100 engines x 20 versions), and a loaded host's scrape waited 164-272 ms for a core. Beat makes
it every `HELIOS_METRICS_SNAPSHOT_SECONDS` into the default cache (one for every web process), kept
three periods; a scrape computes afresh only when none is kept. Counters are at most a period behind.
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
