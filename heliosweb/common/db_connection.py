"""A request whose database connection was lost (a restart, `pg_terminate_backend`, a cut proxy),
or that found Redis away, never answers 500. A view that raised a connection error runs once more
on a fresh connection when its method writes nothing; a write, or a second failure, answers 503
with `Retry-After` (the cut transaction was rolled back: the client may resend). Code outside this
middleware's view call (the engine-token check, the async policy read) uses `read_retried` and
`unavailable_answer` itself.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

RETRY_AFTER_S = 2
T = TypeVar("T")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


# The database could not be reached or dropped the connection (not a constraint, not bad SQL), or
# Redis could not be reached or timed out (not a refused write: `common.redis_errors`).
LOST = (OperationalError, InterfaceError, RedisConnectionError, RedisTimeoutError)
_WHAT = {"database": "the database is unavailable (its connection was lost)", "redis": "Redis is unavailable"}


def lost_backend(exc: BaseException) -> str:
    """Which backend a `LOST` error is about: "database" or "redis" (the answer's `field`)."""
    return "redis" if isinstance(exc, (RedisConnectionError, RedisTimeoutError)) else "database"


def unavailable_answer(request: HttpRequest, backend: str = "database") -> HttpResponse:
    error = f"{_WHAT[backend]}; retry in {RETRY_AFTER_S} s"
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"error": error, "field": backend}, status=503)
    else:
        response = HttpResponse(f"503 Service Unavailable: {error}\n", status=503, content_type="text/plain")
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def _fresh_connection() -> None:
    """Drop the broken connection; the next query opens a new one."""
    with contextlib.suppress(DatabaseError):
        connection.close()


def read_retried(read: Callable[[], T]) -> T:
    """`read()`, once more on a fresh connection if the database cut the first; a second loss (or
    Redis away) is raised, for the caller to answer with `unavailable_answer`."""
    try:
        return read()
    except (OperationalError, InterfaceError) as exc:
        if connection.in_atomic_block:
            raise
        log.warning("database connection lost during a read, reading once more: %s", exc)
        _fresh_connection()
    return read()


class DatabaseConnectionLostMiddleware:
    """Last in MIDDLEWARE: it runs a sync view itself, after every other middleware's `process_view`.
    In an async chain (an async view's: it holds no connection) it passes the request on, no thread."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)  # `__call__` then returns the chain's coroutine
            self.process_view = self._process_view_async  # type: ignore[method-assign, assignment]

    def __call__(self, request: HttpRequest) -> Any:
        return self.get_response(request)

    async def _process_view_async(
        self, request: HttpRequest, view: Callable[..., Any], args: tuple, kwargs: dict[str, Any]
    ) -> HttpResponse | None:
        """Django runs an async view on the loop; a sync one this middleware runs, as in a sync chain, in a thread."""
        if iscoroutinefunction(view):
            return None
        return await sync_to_async(DatabaseConnectionLostMiddleware.process_view)(self, request, view, args, kwargs)

    def process_view(
        self, request: HttpRequest, view: Callable[..., HttpResponse], args: tuple, kwargs: dict[str, Any]
    ) -> HttpResponse | None:
        if iscoroutinefunction(view):
            return None  # an async view (the policy long-poll) is Django's to await; it holds no connection
        attempts = 2 if request.method in SAFE_METHODS else 1
        for attempt in range(1, attempts + 1):
            try:
                return view(request, *args, **kwargs)
            except LOST as exc:
                backend = lost_backend(exc)
                what = f"{request.method} {request.path}: {backend} connection lost (attempt {attempt} of {attempts})"
                log.warning("%s: %s", what, exc)
                if backend == "database":
                    if connection.in_atomic_block:
                        raise  # a test's transaction, or a view inside one: not ours to reconnect
                    _fresh_connection()
        return unavailable_answer(request, backend)
