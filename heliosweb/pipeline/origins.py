"""Which pages may open a websocket: the same origin (scheme, host and port) as the socket, or one
in `CSRF_TRUSTED_ORIGINS` (behind a proxy that terminates TLS). Channels' `AllowedHostsOriginValidator`
compared only the host name, so any other program on the machine could open a user's stream.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from channels.security.websocket import OriginValidator, WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host


def own_origin(scope: dict[str, Any]) -> str | None:
    """The origin of a page served where this socket was opened (its Host header, if allowed)."""
    host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin1")
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    return ("https" if scope.get("scheme") == "wss" else "http") + "://" + host


class SameOriginValidator(OriginValidator):
    """Refuses the handshake (HTTP 403) unless `Origin` matches in scheme, host and port."""

    def __init__(self, application: Any) -> None:
        super().__init__(application, allowed_origins=[])

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        origin = dict(scope.get("headers", [])).get(b"origin")
        allowed = [*settings.CSRF_TRUSTED_ORIGINS, own_origin(scope)]
        parsed = urlparse(origin.decode("latin1")) if origin else None
        if parsed is not None and any(p and self.match_allowed_origin(parsed, p) for p in allowed):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
