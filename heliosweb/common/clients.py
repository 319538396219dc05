"""The client's address, one definition for everything that counts or allows by address: the token
throttle, the login lockout (`AXES_CLIENT_IP_CALLABLE`), `/metrics`' allow-list and the audit trail.

`X-Forwarded-For` is anyone's to write, so it is ignored unless `HELIOS_TRUSTED_PROXIES` says how
many proxies of ours stand in front (default 0: `REMOTE_ADDR`). With N, the client is the N-th
address from the right (each proxy appends the one it saw), as DRF's `NUM_PROXIES` reads it."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings


def client_ip(request: Any) -> str:
    meta = getattr(request, "META", {})
    remote = str(meta.get("REMOTE_ADDR", "") or "")
    proxies = settings.HELIOS_TRUSTED_PROXIES
    if proxies <= 0:
        return remote
    forwarded = [a.strip() for a in str(meta.get("HTTP_X_FORWARDED_FOR", "")).split(",") if a.strip()]
    if not forwarded:
        return remote
    candidate = forwarded[-min(proxies, len(forwarded))]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote  # not an address our proxy would write: the header came from elsewhere
