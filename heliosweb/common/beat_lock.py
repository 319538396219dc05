"""One Celery beat per deployment, however many hosts start one (`CELERY_BEAT_SCHEDULER`).

Two beats send each task twice, and a pid file guards one host only. So beat holds a lease in Redis
(`helios:beat` under the broker's key prefix, `LEASE_S`, renewed every `RENEW_S`): a second beat
waits as a standby, saying who holds it, and takes over when the holder releases it, lets it run
out, or is a dead process on this host (a kill -9). Without Redis there is nothing to share.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

import redis
from celery.beat import PersistentScheduler
from django.conf import settings

from .processes import pid_alive

log = logging.getLogger(__name__)

LEASE_S = 30
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)  # Redis away or too slow to answer (not a refusal)
RENEW_S = 5.0
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('expire', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def lease_key() -> str:
    return f"{settings.CELERY_BROKER_TRANSPORT_OPTIONS['global_keyprefix']}helios:beat"


class BeatLease:
    """The lease itself: `take` (waits while another live beat holds it), `renew`, `release`."""

    def __init__(self, client: redis.Redis, key: str) -> None:
        self.client, self.key = client, key
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.mine = f"{self.host} {self.pid}"

    def try_take(self) -> str | None:
        """None once held; else who holds it ("host pid")."""
        if self.client.set(self.key, self.mine, nx=True, ex=LEASE_S):
            return None
        holder = self.client.get(self.key)
        holder = holder.decode() if isinstance(holder, bytes) else holder
        if holder is None:
            return self.try_take()  # it expired between the two calls
        host, _, pid = holder.partition(" ")
        if host == self.host and pid.isdigit() and int(pid) != self.pid and not pid_alive(int(pid)):
            self.client.delete(self.key)  # a beat of this host that died (kill -9): no need to wait it out
            return self.try_take()
        return None if holder == self.mine else holder

    def take(self, poll_s: float = 1.0) -> None:
        said = None
        while (holder := self._ask(self.try_take)) is not None:
            if holder != said:
                log.warning("beat: another beat runs in this deployment (%s); waiting as a standby", holder)
                said = holder
            time.sleep(poll_s)
        log.info("beat: holding the deployment's beat lease (%s, %s s)", self.key, LEASE_S)

    def renew(self) -> bool:
        """False when the lease went to another beat (this one stalled); a lease Redis lost is taken
        again; Redis away counts as held (no beat can send anything then)."""
        try:
            return bool(self.client.eval(_RENEW, 1, self.key, self.mine, LEASE_S)) or self.try_take() is None
        except UNREACHABLE as exc:
            log.warning("beat: cannot renew its lease, Redis unavailable: %s", exc)
            return True

    def release(self) -> None:
        try:
            self.client.eval(_RELEASE, 1, self.key, self.mine)
        except redis.RedisError as exc:
            log.warning("beat: could not release its lease (it runs out in %s s): %s", LEASE_S, exc)

    @staticmethod
    def _ask(call: Any) -> Any:
        """`call()`, waiting out a Redis that does not answer yet (a beat started before Redis)."""
        while True:
            try:
                return call()
            except UNREACHABLE as exc:
                log.warning("beat: Redis unavailable, waiting for it: %s", exc)
                time.sleep(1.0)


class OneBeatScheduler(PersistentScheduler):
    """Celery's file-backed scheduler, run only while holding the deployment's beat lease."""

    lease: BeatLease | None = None

    def setup_schedule(self) -> None:
        if settings.REDIS_URL:
            client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)
            self.lease = BeatLease(client, lease_key())
            self.lease.take()
        super().setup_schedule()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if self.lease is not None and not self.lease.renew():
            raise SystemExit("beat: its lease went to another beat (this one stalled); exiting so one beat runs")
        return min(super().tick(*args, **kwargs), RENEW_S)

    def close(self) -> None:
        super().close()
        if self.lease is not None:
            self.lease.release()
