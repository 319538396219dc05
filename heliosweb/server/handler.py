"""Django's ASGI handler, with three changes; every request still goes through Django's whole cycle
(the why, with figures: docs/architecture.md, "One request pipeline"; heliosweb/server/README.md).

- A body sent without Content-Length (chunked) is given its real length: Django and DRF read a
  request with no length as empty.
- A sync view marked `kept_thread(view, name)` (the telemetry post) runs its whole sync cycle in one
  hop to one long-lived thread that keeps its database connection (Django hops twice per middleware
  and opens a connection per request).
- An async view marked `kept_thread` (the policy long-poll) runs on the loop with `loop_middleware`,
  its sync calls in its kept thread (1,000 engines answered at once woke 1,000 threads, started 1,000).
- Every other view is served as Django serves a sync view under ASGI, in one hop.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, TypeVar

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.db import connections
from django.http import FileResponse, HttpRequest, HttpResponseBase
from django.urls import Resolver404, resolve

from .loop_middleware import ON_LOOP

View = TypeVar("View", bound=Callable[..., Any])

_LANE = "kept_thread"  # the attribute a marked view carries: its executor


def kept_thread(view: View, name: str) -> View:
    """Mark `view` to be served with one thread named `name`; a sync handler (tests' Client) calls it as usual."""
    setattr(view, _LANE, ThreadPoolExecutor(max_workers=1, thread_name_prefix=name))
    return view


def lane_of(view: Callable[..., Any]) -> ThreadPoolExecutor | None:
    """The thread a view marked with `kept_thread` runs in (tests reach its connection through it)."""
    executor = getattr(view, _LANE, None)
    return executor if isinstance(executor, ThreadPoolExecutor) else None


class HeliosASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()  # Django's async chain, for async views (see load_middleware)
        self._in_thread = BaseHandler()
        self._in_thread.load_middleware(is_async=False)  # the same list, for sync views, in one hop

    def load_middleware(self, is_async: bool = False) -> None:
        """Django's, the async chain with `loop_middleware.ON_LOOP`'s subclasses for the library classes."""
        listed = settings.MIDDLEWARE
        settings.MIDDLEWARE = [ON_LOOP.get(path, path) for path in listed] if is_async else listed
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = listed

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        view = _view_for(scope["path"].removeprefix(scope.get("root_path", ""))) if scope["type"] == "http" else None
        executor = lane_of(view) if view is not None else None
        if executor is None:
            await super().__call__(scope, receive, send)  # a thread of its own per request, as Django does
            return
        # The kept thread for every sync call, the request signals' too: a context of its own started
        # a thread per request and another to shut it down (20.4 ms of web CPU per 1,000-record batch,
        # 16.7 ms without: docs/bench/2026-12-02-one-thread.md).
        async with ThreadSensitiveContext(executor=executor):
            await self.handle(scope, receive, send)

    def create_request(self, scope: Mapping[str, Any], body_file: IO[bytes]) -> Any:
        request, error = super().create_request(scope, body_file)
        if request is not None and "CONTENT_LENGTH" not in request.META:
            request.META["CONTENT_LENGTH"] = str(_size(body_file))
        return request, error

    async def run_get_response(self, request: HttpRequest) -> HttpResponseBase:
        view = _view_for(request.path_info)
        if view is not None and iscoroutinefunction(view):
            return await super().run_get_response(request)  # on the loop, middleware and all
        executor = lane_of(view) if view is not None else None
        if executor is None:
            response = await sync_to_async(self._in_thread.get_response, thread_sensitive=True)(request)
        else:
            context = contextvars.copy_context()  # the script prefix and the like, as sync_to_async would carry
            response = await asyncio.get_running_loop().run_in_executor(
                executor, functools.partial(context.run, self._serve_in_lane, request)
            )
        response._handler_class = self.__class__  # type: ignore[attr-defined]  # as Django's own does
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size  # as Django's own does: the server chunks
        return response

    def _serve_in_lane(self, request: HttpRequest) -> HttpResponseBase:
        _close_unusable()
        response = self._in_thread.get_response(request)
        if response.status_code >= 500:
            connections.close_all()  # whatever failed may have broken a connection: the next request opens anew
        else:
            _keep_open()
        return response


def _view_for(path_info: str) -> Callable[..., Any] | None:
    try:
        return resolve(path_info).func
    except Resolver404:
        return None


def _size(body_file: IO[bytes]) -> int:
    """The length of a spooled body (Django's `read_body` leaves it at its start)."""
    size = body_file.seek(0, 2)
    body_file.seek(0)
    return size


def _keep_open() -> None:
    """Mark this thread's open connections as kept: `request_finished`'s `close_old_connections`
    then closes one only when it failed, not at each request's end (`CONN_MAX_AGE` 0)."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            connection.close_at = None


def _close_unusable() -> None:
    """Close this thread's connections the database dropped while they idled (a restart): the next
    query opens a new one (the kept connections are never closed by `close_old_connections`)."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            connection.close()
