"""kombu's Redis transport, with a closed connection reported as a connection error (Celery's
`broker_transport`, set in settings when REDIS_URL is).

Why: on a Redis outage Celery 5.7.0's consumer `collect()`s the broken connection (its `client`
becomes None) and then `close()`s it; requeueing the running job's message there reads
`self.connection.client.hostname`: an AttributeError, not a connection error to Celery, so the
worker exited "Unrecoverable error". No release (kombu and celery 5.7.0) fixes it, no setting skips
it. A redis `ConnectionError` instead is ignored, Celery reconnects about a second after Redis
answers, and the job's message, back after the visibility timeout, is skipped
(`jobs.services.runner.job_run`). Drill: `tests/heliosweb/test_redis_restart.py`.
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
