"""The answer to a locked-out login (django-axes' `AXES_LOCKOUT_CALLABLE`): 429 with `Retry-After`
in seconds and a page that says until when. A lockout lasts `AXES_COOLOFF_TIME` from the latest
failure of that user from that address (axes counts a failure while locked out too, so a guesser
who keeps trying keeps the lock); the seconds left are read from axes' own attempt records."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from axes.handlers.proxy import AxesProxyHandler  # type: ignore[import-untyped]
from axes.helpers import get_client_username, get_cool_off, get_failure_limit  # type: ignore[import-untyped]
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from .http_errors import json_error


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict[str, Any] | None = None
) -> HttpResponse:
    cool_off = get_cool_off(request)
    until = locked_until(request, credentials, cool_off)
    seconds = max(1, math.ceil((until - timezone.now()).total_seconds())) if until else None
    username = get_client_username(request, credentials) or ""
    if request.path.startswith("/api/") or request.headers.get("x-requested-with") == "XMLHttpRequest":
        when = f": try again in {seconds} s" if seconds else ""
        response: HttpResponse = json_error(
            429, "password", f"too many failed logins for this user from this address{when}"
        )
    else:
        context = {
            "failure_limit": get_failure_limit(request, credentials),
            "username": username,
            "locked_until": until,
            "retry_after_s": seconds,
            "retry_after_min": math.ceil(seconds / 60) if seconds else None,
        }
        response = render(request, "registration/locked_out.html", context, status=429)
    if seconds:
        response["Retry-After"] = str(seconds)
    return response


def locked_until(
    request: HttpRequest, credentials: dict[str, Any] | None, cool_off: timedelta | None
) -> datetime | None:
    """When the lock on this user and address lifts: its latest failure plus the cool-off (the
    whole cool-off from now when the handler keeps no records to read); None: it never lifts."""
    if cool_off is None:
        return None
    handler = AxesProxyHandler.get_implementation()
    attempts = getattr(handler, "get_user_attempts", None)
    latest = None
    if attempts is not None:
        times = [
            a.order_by("-attempt_time").values_list("attempt_time", flat=True).first()
            for a in attempts(request, credentials)
        ]
        latest = max((t for t in times if t is not None), default=None)
    return (latest or timezone.now()) + cool_off
