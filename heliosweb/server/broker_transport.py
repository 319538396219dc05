"""kombu's Redis transport, with a closed connection reported as a connection error (Celery's
`broker_transport`, set in settings when REDIS_URL is).

Why: on a Redis outage Celery 5.7.0's consumer (`on_connection_error_after_connected`) first
`collect()`s the broken connection, which sets the transport's `client` to None, and then
`close()`s it (new in 5.7; 5.6 only collected). The first close of the channel was cut short by
the outage (it raised before marking the channel closed), so the second one runs again, and
requeueing the running job's unacknowledged message (`QoS.restore_unacked`) builds a new pool from
`_connparams`, which reads `self.connection.client.hostname`: an `AttributeError`, which Celery
does not count as a connection error, so the worker exited "Unrecoverable error: AttributeError(
\"'NoneType' object has no attribute 'hostname'\")" (the engine worker, a thread pool, hung half
shut down instead). No kombu or Celery release fixes it yet (kombu 5.7.0 and celery 5.7.0 are the
newest), and no setting skips that close.

Raising redis' `ConnectionError` there instead is what the rest of the code expects of a broker
that went away: Celery ignores it in the close, reconnects, and the worker takes jobs again about a
second after Redis answers. The running job's message stays in Redis' unacknowledged set (its ack
is refused too), so it comes back after the visibility timeout and the job, already ended, is
skipped (`jobs.services.runner.job_run`). Drill: `tests/heliosweb/test_redis_restart.py`.
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
