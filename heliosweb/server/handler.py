"""Django's ASGI handler, with these changes; every request still goes through Django's whole cycle.

- A body sent without Content-Length (`Transfer-Encoding: chunked`, which the server has already
  decoded) is given its real length: Django and DRF read a request with no length as empty, so
  every API POST sent chunked used to arrive with no data.
- A sync view marked with `kept_thread(view, name)` runs, middleware and all, in one long-lived
  thread of its own. Under ASGI Django runs the middleware of a sync view in a new thread per
  request, hopping between that thread and the event loop twice per middleware, and opens the
  view's database connection there and closes it after, whatever `CONN_MAX_AGE` says (the thread
  ends). For engines' telemetry posts, tens of thousands of records a second through a view that
  takes one batch at a time anyway, that was most of a small batch's cost. Here the same
  middleware list (`settings.MIDDLEWARE`, loaded in sync mode), URL resolver, view and exception
  handling run in one hop to that thread, which keeps its connection from one request to the
  next (and replaces it when the database dropped it). The request signals are sent as for any
  request, and their receivers run in that same thread: not on asgiref's one shared sync thread
  (behind Channels' database calls, where a burst of websocket handshakes would hold telemetry
  posts), nor in a thread started for each request, as Django's per-request context does. This is
  the lane Zulip's Tornado server uses for its own hot path: Django's handler, called from the
  server's loop.
- An async view marked with `kept_thread` (the policy long-poll) runs on the event loop with its
  middleware: every middleware in the list is async-capable, the library ones as the subclasses
  that run their methods on the loop (`server.loop_middleware`), so no thread is taken per request; its sync
  calls (database reads, the request signals' receivers) go to its one kept thread. Django gives
  each request a thread of its own for those, started when first used and joined by yet another
  thread at its end; with sync-only middleware in the list, an async view's whole middleware chain
  ran in that thread, waiting there while the view waited. One policy change answers every engine
  long-polling the recipe at once: at 1,000 engines, 1,000 threads woke, each passing its answer
  back through the middleware, then 1,000 more were started to join them, and the last engine
  heard of the change seconds after the first.
- Every other view is served as Django serves a sync view under ASGI: the same middleware list in
  sync mode, in the request's own thread, in one hop.
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
    """Mark `view` to be served with one thread named `name`: a sync view in it, an async one on the
    loop with its sync calls in it (see the module's docstring). The view itself is unchanged: a
    sync handler (tests' Client, WSGI) calls it as usual."""
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
        """Django's, from `settings.MIDDLEWARE` with the library classes that `loop_middleware.ON_LOOP`
        names replaced by their subclasses that run on the loop (Django reads the list from settings)."""
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
        # The view's kept thread for every sync call of the request, the request signals' receivers
        # included: in a context of its own, each request started a thread for them and another
        # to shut it down: a 1,000-record batch cost 20.4 ms of web CPU (median), 16.7 ms without
        # (docs/bench/2026-12-02-one-thread.md).
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
    """Mark this thread's open connections as kept: `request_finished`'s `close_old_connections`,
    which runs in this thread too, then closes one only when it failed (`CONN_MAX_AGE` 0 would
    close it at each request's end, which is what the kept thread is for avoiding)."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            connection.close_at = None


def _close_unusable() -> None:
    """Close this thread's connections that the database dropped while they idled (a restart): the
    next query opens a new one. Django's `close_old_connections` would close them all at each
    request's end (`CONN_MAX_AGE` 0), which is what the kept thread is for avoiding."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            connection.close()
