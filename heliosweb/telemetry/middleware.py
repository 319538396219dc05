"""Engine tokens are scoped in one place, before any view runs: a request carrying one reaches only
the engine routes (policy read, telemetry post, boot upload) of the recipes the token names;
everything else answers 403, whatever the view's own authentication would have said."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.utils.decorators import sync_and_async_middleware

from heliosweb.common.auth import bearer_token
from heliosweb.common.db_connection import LOST, lost_backend, read_retried, unavailable_answer
from heliosweb.common.http_errors import json_error

from .models import TOKEN_PREFIX
from .selectors import engine_grant_get

# What an engine token reaches, by route: every method, or only those named. An engine uploads the
# catalog it measured at start as a boot of its recipe (POST only: it never reads other boots).
ENGINE_ROUTES: dict[str, frozenset[str] | None] = {
    "api_recipe_policy": None,
    "api_recipe_telemetry": None,
    "api_recipe_boots": frozenset({"POST"}),
}


@dataclass(frozen=True)
class Engine:
    """The principal behind an engine token: DRF and the views treat it as an authenticated caller."""

    name: str
    recipes: frozenset[str]
    is_authenticated = True
    is_active = True
    is_staff = False

    def has_perm(self, perm: str, obj: object = None) -> bool:
        return False

    def get_username(self) -> str:
        """How the audit trail names it (a refused post, such as a 409, is recorded with its name)."""
        return f"engine:{self.name}"


def engine_token_in(authorization: str) -> str | None:
    """The engine token an `Authorization` header carries (`Bearer heng_...`), or None."""
    token = bearer_token(authorization)
    return token if token and token.startswith(TOKEN_PREFIX) else None


@sync_and_async_middleware
def engine_token_scope(get_response: Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]):
    if iscoroutinefunction(get_response):

        async def async_middleware(request: HttpRequest) -> HttpResponse:
            token = engine_token_in(request.headers.get("Authorization", ""))
            if token is not None:
                refusal = await sync_to_async(_admitted_or_unavailable)(request, token)
                if refusal is not None:
                    return refusal
            return await get_response(request)

        return async_middleware

    def middleware(request: HttpRequest) -> HttpResponse:
        token = engine_token_in(request.headers.get("Authorization", ""))
        if token is not None:
            refusal = _admitted_or_unavailable(request, token)
            if refusal is not None:
                return refusal
        return get_response(request)  # type: ignore[return-value]

    return middleware


def _admitted_or_unavailable(request: HttpRequest, token: str) -> HttpResponse | None:
    """`_admit`, its token read retried once on a cut connection; the database away answers 503
    with Retry-After (this runs before the view, outside `common.db_connection`'s middleware)."""
    try:
        return read_retried(lambda: _admit(request, token))
    except LOST as exc:
        return unavailable_answer(request, lost_backend(exc))


def _admit(request: HttpRequest, token: str) -> JsonResponse | None:
    """Set `request.engine`, or the refusal: 401 for an unknown or revoked token, 403 off its routes."""
    grant = engine_grant_get(token=token)
    if grant is None:
        return json_error(401, "authorization", "unknown or revoked engine token")
    engine = Engine(grant.engine, grant.recipes)
    try:
        match = resolve(request.path_info)
    except Resolver404:
        match = None
    route = match.url_name if match is not None else None
    methods = ENGINE_ROUTES.get(route or "", frozenset())
    if (
        match is None
        or route not in ENGINE_ROUTES
        or (methods is not None and request.method not in methods)
        or match.kwargs.get("name") not in engine.recipes
    ):
        reach = f"may only read the policy, post telemetry and upload boots of {sorted(engine.recipes)}"
        return json_error(403, "authorization", f"engine {engine.name!r}'s token {reach}")
    request.engine = engine  # type: ignore[attr-defined]
    return None
