"""API authentication: the classes every endpoint may list (`REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]`
has the bearer token next to the session)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, TokenAuthentication
from rest_framework.request import Request


class BearerTokenAuthentication(TokenAuthentication):
    """`Authorization: Bearer <token>`; tokens come from `manage.py create_api_token <username>`."""

    keyword = "Bearer"


class EngineAuthentication(BaseAuthentication):
    """The engine that the engine-token scope middleware (`telemetry.middleware`) admitted for this
    route and recipe (`request.engine`), if any."""

    def authenticate(self, request: Request) -> tuple[Any, None] | None:
        engine = getattr(request._request, "engine", None)
        return None if engine is None else (engine, None)


class EngineAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = EngineAuthentication
    name = "engineToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "manage.py create_api_token --engine NAME --recipes a,b",
        }
