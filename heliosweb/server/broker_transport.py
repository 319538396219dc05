"""kombu's Redis transport, with a closed connection reported as a connection error (Celery's
`broker_transport`, set in settings when REDIS_URL is).

Why: on a Redis outage Celery 5.7.0's consumer first `collect()`s the broken connection (the
transport's `client` becomes None), then `close()`s it (new in 5.7). Requeueing the running job's
unacked message in that close builds a pool from `_connparams`, which reads
`self.connection.client.hostname`: an `AttributeError`, not a connection error to Celery, so the
worker exited "Unrecoverable error" (the thread-pool engine worker hung half shut down). No kombu
or Celery release (5.7.0 is the newest) fixes it, and no setting skips that close.

Raising redis' `ConnectionError` instead makes Celery ignore it, reconnect, and take jobs again
about a second after Redis answers; the running job's message comes back after the visibility
timeout and is skipped (`jobs.services.runner.job_run`). Drill: `tests/heliosweb/test_redis_restart.py`.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:  # the Connection was collected after a connection loss
            raise RedisConnectionError("the broker connection was closed after a connection loss")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
