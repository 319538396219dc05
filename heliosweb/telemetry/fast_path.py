"""Engines' telemetry posts, answered without Django's request cycle.

Ingestion aims at 50,000 launch records per second into one web process (batches of 1,000: 20 ms a
batch). Through Django and DRF a batch paid ~15 ms before its first record was read: a new thread
per request (Django runs each sync request in one), a new database connection in it, the request
signals, twelve middleware and DRF's dispatch. Here an engine's post goes from the ASGI scope to one
long-lived ingest thread, which keeps its database connection, and the same service validates and
stores it (`services.telemetry_ingest`).

Only the common case takes this path: a POST to `api_recipe_telemetry` with a JSON body of at most
`MAX_BYTES`, an allowed Host, and a live engine token for that recipe. Anything else (no token, an
unknown or revoked one, another recipe, an unknown recipe, a body too large, another content type)
is handed to Django, given first whatever of its body was read, so every refusal is the one the
view and the token middleware already answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import connections
from django.http.request import split_domain_port, validate_host
from django.urls import Resolver404, resolve

from heliosweb.common.bounds import parse_json
from heliosweb.common.errors import http_status, internal_error
from heliosweb.recipes.selectors import recipe_get
from scheduler_core.errors import InvalidInput

from . import services
from .middleware import engine_token_in
from .selectors import engine_grant_get
from .validation import MAX_BYTES

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]  # Django's handler types its arguments its own way

ROUTE = "api_recipe_telemetry"
_HEADERS = [(b"content-type", b"application/json"), (b"x-content-type-options", b"nosniff")]

# One thread for every batch of this process: it keeps its database connection from one batch to
# the next, and batches are one at a time anyway (`services.telemetry_turn`).
_INGEST = ThreadPoolExecutor(max_workers=1, thread_name_prefix="telemetry-ingest")


class EngineTelemetryFastPath:
    """ASGI middleware in front of Django's HTTP application (see the module's docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = _target(scope)
        if target is None:
            return await self.app(scope, receive, send)
        name, token = target
        body, complete = await _read(receive)
        answer = None
        if complete:
            answer = await asyncio.get_running_loop().run_in_executor(_INGEST, _answer, name, token, body)
        if answer is None:
            return await self.app(scope, _replay(body, complete, receive), send)
        status, content = answer
        headers = [*_HEADERS, (b"content-length", str(len(content)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})


def _target(scope: Scope) -> tuple[str, str] | None:
    """(recipe name, engine token) when the request may take the fast path; None hands it to Django."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
        return None
    headers = dict(scope["headers"])  # ASGI names are lower case; a repeated header keeps its last value
    token = engine_token_in(headers.get(b"authorization", b"").decode("latin-1"))
    if token is None:
        return None
    if headers.get(b"content-type", b"").split(b";")[0].strip() != b"application/json":
        return None
    length = headers.get(b"content-length", b"0")
    if not length.isdigit() or int(length) > MAX_BYTES:  # Django refuses a malformed or too large one
        return None
    host, _port = split_domain_port(headers.get(b"host", b"").decode("latin-1"))
    if not host or not validate_host(host, settings.ALLOWED_HOSTS):
        return None
    try:
        match = resolve(scope["path"])
    except Resolver404:
        return None
    if match.url_name != ROUTE:
        return None
    return match.kwargs["name"], token


async def _read(receive: Receive) -> tuple[bytes, bool]:
    """The body, and whether it is all there: reading stops past MAX_BYTES (Django then refuses it)
    or at a disconnect."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True
        if size > MAX_BYTES:
            return b"".join(chunks), False


def _replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    """`receive` as if nothing had been read: first what was, then whatever follows."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": not complete}

    return replay


def _answer(name: str, token: str, body: bytes) -> tuple[int, bytes] | None:
    """In the ingest thread: (status, JSON body), or None where Django should answer instead."""
    try:
        _reopen_unusable()
        grant = engine_grant_get(token=token)
        if grant is None or name not in grant.recipes:
            return None
        try:
            recipe = recipe_get(name=name)
            with services.telemetry_turn():
                batch, created = services.telemetry_ingest(recipe=recipe, data=parse_json(body), engine=grant.engine)
        except InvalidInput as exc:
            return http_status(exc), json.dumps(exc.as_dict()).encode()
        return (201 if created else 200), json.dumps(services.batch_receipt(batch, created)).encode()
    except Exception:
        # A connection the database dropped, or a bug: logged, answered as the API answers any
        # unexpected error, and this thread's connections reopened for the next batch.
        log.exception("telemetry batch for %s failed", name)
        connections.close_all()
        return 500, json.dumps(internal_error()).encode()


def _reopen_unusable() -> None:
    """Close this thread's connections that the database dropped while they idled (a PostgreSQL
    restart): the next query opens a new one. Django does this per request; this thread outlives them."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            connection.close()
