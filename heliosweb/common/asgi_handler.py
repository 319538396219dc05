"""Django's ASGI handler, with two changes; every request still goes through Django's whole cycle.

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
  next (and replaces it when the database dropped it); the request signals are sent as for any
  request, from the request's own thread-sensitive context (measured without it, ~1-2 ms less
  per request, but then they queue on asgiref's one shared sync thread, behind Channels' database
  calls: a burst of websocket handshakes would hold telemetry posts). This is the lane Zulip's
  Tornado server uses for its own hot path: Django's handler, called from the server's loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, TypeVar

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.db import connections
from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, resolve

View = TypeVar("View", bound=Callable[..., HttpResponseBase])

_LANE = "kept_thread"  # the attribute a marked view carries: its executor


def kept_thread(view: View, name: str) -> View:
    """Mark the sync `view` to be served in one thread named `name` (see the module's docstring).
    The view itself is unchanged: a sync handler (tests' Client, WSGI) calls it as usual."""
    setattr(view, _LANE, ThreadPoolExecutor(max_workers=1, thread_name_prefix=name))
    return view


def lane_of(view: Callable[..., Any]) -> ThreadPoolExecutor | None:
    """The thread a view marked with `kept_thread` runs in (tests reach its connection through it)."""
    executor = getattr(view, _LANE, None)
    return executor if isinstance(executor, ThreadPoolExecutor) else None


class HeliosASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._in_lane = BaseHandler()
        self._in_lane.load_middleware(is_async=False)  # the same list, called without thread hops

    def create_request(self, scope: Mapping[str, Any], body_file: IO[bytes]) -> Any:
        request, error = super().create_request(scope, body_file)
        if request is not None and "CONTENT_LENGTH" not in request.META:
            request.META["CONTENT_LENGTH"] = str(_size(body_file))
        return request, error

    async def run_get_response(self, request: HttpRequest) -> HttpResponseBase:
        executor = _lane_for(request.path_info)
        if executor is None:
            return await super().run_get_response(request)
        context = contextvars.copy_context()  # the script prefix and the like, as sync_to_async would carry
        response = await asyncio.get_running_loop().run_in_executor(
            executor, functools.partial(context.run, self._serve_in_lane, request)
        )
        response._handler_class = self.__class__  # type: ignore[attr-defined]  # as Django's own does
        return response

    def _serve_in_lane(self, request: HttpRequest) -> HttpResponseBase:
        _close_unusable()
        response = self._in_lane.get_response(request)
        if response.status_code >= 500:
            connections.close_all()  # whatever failed may have broken a connection: the next request opens anew
        return response


def _lane_for(path_info: str) -> ThreadPoolExecutor | None:
    try:
        return lane_of(resolve(path_info).func)
    except Resolver404:
        return None


def _size(body_file: IO[bytes]) -> int:
    """The length of a spooled body (Django's `read_body` leaves it at its start)."""
    size = body_file.seek(0, 2)
    body_file.seek(0)
    return size


def _close_unusable() -> None:
    """Close this thread's connections that the database dropped while they idled (a restart): the
    next query opens a new one. Django's `close_old_connections` would close them all at each
    request's end (`CONN_MAX_AGE` 0), which is what the kept thread is for avoiding."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            connection.close()
