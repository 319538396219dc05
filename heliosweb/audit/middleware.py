"""Refused attempts on mutating endpoints go to the audit trail: who tried what, from where."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse

from heliosweb.common.clients import client_ip

from .services import audit_append

log = logging.getLogger(__name__)

SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")
REFUSED = (401, 403, 409, 429)  # not allowed, not now, or too many tries


class RefusedAttemptsMiddleware:
    """In sync and async chains alike; in an async one, a refusal is recorded in a thread (the
    database, and the user it names, read there), anything else passes with no thread."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        response = self.get_response(request)
        if _refused(request, response):
            _record(request, response)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        response = await self.get_response(request)
        if _refused(request, response):
            await sync_to_async(_record)(request, response)
        return response


def _refused(request: HttpRequest, response: HttpResponse) -> bool:
    return request.method not in SAFE_METHODS and response.status_code in REFUSED


def _record(request: HttpRequest, response: HttpResponse) -> None:
    user = getattr(request, "user", None)
    try:
        audit_append(
            action="refused",
            actor=user,
            actor_name="" if user is None else str(user.get_username() or ""),
            object_type="endpoint",
            object_id=f"{request.method} {request.path}"[:64],
            after={"status": response.status_code, "method": request.method, "path": request.path[:500]},
            client_addr=client_ip(request),
        )
    except DatabaseError:  # the refusal stands either way; say the record is missing
        log.exception("could not record a refused %s %s", request.method, request.path)
