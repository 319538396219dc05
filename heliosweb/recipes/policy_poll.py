"""`GET /api/recipes/<name>/policy`: what engines read before their prefill decisions, cheaply.
Every answer carries `ETag: "v<version>"`; `If-None-Match` with it answers 304. `?wait=N` (N <= 30
s) long-polls: subscribed to the recipe's policy topic (`heliosweb.realtime.broadcast`) before
reading the version, the view sleeps on the subscription, not on a thread or a connection, until a
change or the deadline (304). An async Django view (DRF has none), in the API's `{error, field}` shape.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from rest_framework.authtoken.models import Token

from heliosweb.common.auth import bearer_token
from heliosweb.common.db_connection import LOST, lost_backend, read_retried, unavailable_answer
from heliosweb.common.errors import NotFound
from heliosweb.common.http_errors import json_error
from heliosweb.common.tokens import user_token_key
from heliosweb.realtime.broadcast import Message, subscribe
from heliosweb.server.handler import kept_thread
from scheduler_core.validation import number_of_text

from .selectors import recipe_policy_get
from .services import policy_topic

log = logging.getLogger(__name__)

MAX_WAIT_S = 30


@require_GET
async def _recipe_policy(request: HttpRequest, name: str) -> HttpResponse:
    """The database or Redis away answers 503 with Retry-After, as every view does
    (`common.db_connection`: this async view is not run by its middleware); reads are retried once."""
    try:
        return await _answer(request, name)
    except LOST as exc:
        log.warning("policy read for %s: %s unavailable: %s", name, lost_backend(exc), exc)
        return unavailable_answer(request, lost_backend(exc))


async def _answer(request: HttpRequest, name: str) -> HttpResponse:
    if not await _authenticated(request):
        return json_error(401, "authorization", "log in, or send Authorization: Bearer <token>")
    try:
        wait = _wait_seconds(request.GET.get("wait"))
    except ValueError as exc:
        return json_error(400, "wait", str(exc))
    known = _versions(request.headers.get("If-None-Match", ""))
    try:
        if wait and known:
            async with subscribe(policy_topic(name)) as changes:  # before the read: nothing falls between
                policy = await _read(name)
                if _matches(policy, known):
                    policy = await _until_changed(name, changes, known, wait)
        else:
            policy = await _read(name)
    except NotFound as exc:
        return JsonResponse(exc.as_dict(), status=404)
    if _matches(policy, known):
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(json.dumps(policy), content_type="application/json")
    response["ETag"] = _tag(policy)
    response["Cache-Control"] = "no-cache"
    return response


# Served on the loop, its middleware too; its sync calls (the token, the reads) in one thread.
recipe_policy = kept_thread(_recipe_policy, "policy-poll")


async def _until_changed(name: str, changes: asyncio.Queue[Message], known: set[str], wait: float) -> dict[str, Any]:
    """The policy once its tag is none of `known`, or as it stands at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    policy: dict[str, Any] | None = None
    while (left := deadline - loop.time()) > 0:
        try:
            message = (await asyncio.wait_for(changes.get(), left)).data
        except TimeoutError:
            break
        announced = message.get("version") if message.get("type") == "policy" else None
        if announced is not None and _matches(message, known):
            continue  # an announcement of the version the engine already has
        policy = await _read_after(name, announced)  # the database is the source of truth (and answers a resync)
        if not _matches(policy, known):
            return policy
    return policy or await _read(name)


async def _read(name: str) -> dict[str, Any]:
    return await sync_to_async(read_retried)(lambda: recipe_policy_get(name=name))


# (event loop, recipe, announced version) -> the read in flight: every engine one change wakes shares
# one query (reading for itself, the last of 1,000 waiters answered seconds after the change).
_reads_after: dict[tuple[int, str, int], asyncio.Future[dict[str, Any]]] = {}


async def _read_after(name: str, version: int | None) -> dict[str, Any]:
    """The policy read after the announcement of `version` (None: a resync, read alone). A read
    shared is one started after that announcement, so after the commit it announced."""
    if version is None:
        return await _read(name)
    key = (id(asyncio.get_running_loop()), name, version)
    read = _reads_after.get(key)
    if read is None:
        read = _reads_after[key] = asyncio.ensure_future(_read(name))
        read.add_done_callback(lambda _: _reads_after.pop(key, None))
    return await asyncio.shield(read)


def _tag(policy: dict[str, Any]) -> str:
    return f'"v{policy["version"]}"'


def _matches(policy: dict[str, Any], known: set[str]) -> bool:
    """Whether If-None-Match names this version; `*` names any (RFC 9110 13.1.2: 304 while the
    recipe has a policy at all, and a long-poll with it waits out its deadline)."""
    return "*" in known or _tag(policy) in known


def _versions(header: str) -> set[str]:
    """The entity tags an If-None-Match header lists (weak ones compare equal, as RFC 9110 says for GET)."""
    return {t.strip().removeprefix("W/") for t in header.split(",") if t.strip()}


def _wait_seconds(text: str | None) -> float:
    if text is None or text == "":
        return 0.0
    wait = number_of_text(text)
    if wait is None:  # float() would also read "1_0", full-width digits, "nan"
        raise ValueError(f"must be a number of seconds in decimal digits, got {text[:40]!r}")
    if not 0 <= wait <= MAX_WAIT_S:
        raise ValueError(f"must be between 0 and {MAX_WAIT_S} seconds, got {text}")
    return wait


async def _authenticated(request: HttpRequest) -> bool:
    """An engine token (admitted for this recipe by the scope middleware), a session, or a user's API token."""
    if getattr(request, "engine", None) is not None:
        return True
    if (await request.auser()).is_authenticated:
        return True
    key = bearer_token(request.headers.get("Authorization", ""))
    if not key:
        return False
    return await Token.objects.filter(key=user_token_key(key), user__is_active=True).aexists()


def add_to_openapi(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: this async view is not a DRF view, so describe it here."""
    ok = {
        "description": "the active policy; ETag is its version",
        "headers": {"ETag": {"schema": {"type": "string"}, "description": '"v<version>"'}},
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "recipe": {"type": "string"},
                        "policy": {"type": "string"},
                        "version": {"type": "integer"},
                        "decided_at": {"type": "string", "format": "date-time"},
                        "decision": {"type": "integer", "nullable": True},
                        "capacities": {
                            "type": "array",
                            "items": {"type": "integer"},
                            "description": "solo prefill capacities to measure and plan with (the "
                            "recipe's shapes, else its newest boot's; empty: the engine's own)",
                        },
                    },
                }
            }
        },
    }
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    result.setdefault("paths", {})["/api/recipes/{name}/policy"] = {
        "get": {
            "operationId": "recipes_policy_retrieve",
            "summary": "Read a recipe's active policy (ETag, If-None-Match, long-poll with ?wait=)",
            "parameters": [
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                {
                    "name": "wait",
                    "in": "query",
                    "schema": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_S},
                    "description": "seconds to wait for a version other than If-None-Match's",
                },
                {"name": "If-None-Match", "in": "header", "schema": {"type": "string"}},
            ],
            "responses": {
                "200": ok,
                "304": {"description": "the version in If-None-Match is still current"},
                "400": {"description": "bad wait", **error},
                "401": {"description": "not authenticated", **error},
                "403": {"description": "an engine token for another recipe", **error},
                "404": {"description": "unknown recipe", **error},
                "503": {"description": "the database or Redis is away; Retry-After says when to ask again", **error},
            },
            "tags": ["recipes"],
            # Who may read it: an engine token for this recipe, a user's token or a logged-in session.
            "security": [{"engineToken": []}, {"tokenAuth": []}, {"cookieAuth": []}],
        }
    }
    result.setdefault("components", {}).setdefault("schemas", {}).setdefault(
        "Error", {"type": "object", "properties": {"error": {"type": "string"}, "field": {"type": "string"}}}
    )
    return result
