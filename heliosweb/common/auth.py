"""API authentication: the classes every endpoint may list (`REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]`
has the bearer token next to the session)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from .clients import client_ip
from .tokens import user_token_key


class TokenFailureThrottle(SimpleRateThrottle):
    """Counts failed token checks per client address (rate `token_failure` in DEFAULT_THROTTLE_RATES).
    DRF's own throttles run after authentication and count every request; this counts only failures."""

    scope = "token_failure"
    num_requests: int  # set by SimpleRateThrottle from the rate
    duration: int

    def get_rate(self) -> str:
        return str(api_settings.DEFAULT_THROTTLE_RATES[self.scope])  # read now: the class attribute is read at import

    def __init__(self, request: Request) -> None:
        super().__init__()
        self.key = self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
        self.now = self.timer()
        self.history = [t for t in self.cache.get(self.key, []) if t > self.now - self.duration]

    def get_ident(self, request: Request) -> str:
        return client_ip(request)  # the one reading of HELIOS_TRUSTED_PROXIES (NUM_PROXIES is the same number)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.key

    def exhausted(self) -> bool:
        return len(self.history) >= self.num_requests

    def record(self) -> None:
        self.history.insert(0, self.now)
        self.cache.set(self.key, self.history, self.duration)


def bearer_token(authorization: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, the scheme in any case (RFC 9110
    11.1); "" when no single token follows it; None for no header or another scheme. The one
    reading of the header (token authentication, the engine-token scope, the policy read, /metrics)."""
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = credentials.strip()
    return "" if not token or any(c.isspace() for c in token) else token


class BearerTokenAuthentication(TokenAuthentication):
    """`Authorization: Bearer <token>` (`manage.py create_api_token`, or the admin), looked up by its
    hash. After too many wrong tokens from one address, every token from it is 429 (Retry-After)."""

    keyword = "Bearer"

    def authenticate_credentials(self, key: str) -> Any:
        return super().authenticate_credentials(user_token_key(key))

    def authenticate(self, request: Request) -> Any:
        token = bearer_token(request.META.get("HTTP_AUTHORIZATION", ""))
        if token is None:
            return None  # no token offered: the session decides
        throttle = TokenFailureThrottle(request)
        if throttle.exhausted():
            raise Throttled(wait=throttle.wait(), detail="too many failed token attempts from this address")
        try:
            if not token:
                raise AuthenticationFailed("send one token: Authorization: Bearer <token>")
            return self.authenticate_credentials(token)
        except AuthenticationFailed:
            throttle.record()
            raise


class EngineAuthentication(BaseAuthentication):
    """The engine `telemetry.middleware` admitted for this route and recipe (`request.engine`), if any."""

    def authenticate(self, request: Request) -> tuple[Any, None] | None:
        engine = getattr(request._request, "engine", None)
        return None if engine is None else (engine, None)

    def authenticate_header(self, request: Request) -> str:
        """Listed first, it makes no credentials a 401 with this challenge (else DRF answers 403)."""
        return 'Bearer realm="api"'


class EngineAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = EngineAuthentication
    name = "engineToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "manage.py create_api_token --engine NAME --recipes a,b",
        }
