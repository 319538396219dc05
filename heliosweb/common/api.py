"""What every JSON endpoint shares: the error shape `{error, field}` (and its schema), the one
exception handler that produces it, and reading a JSON object body with known fields."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.utils import inline_serializer
from drf_spectacular.views import SpectacularAPIView
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from scheduler_core.errors import InvalidInput

from .db_connection import connection_lost
from .errors import Throttled, TooLarge, http_status, internal_error
from .http_errors import JSON_ONLY

log = logging.getLogger(__name__)

ERROR = inline_serializer("Error", {"error": serializers.CharField(), "field": serializers.CharField()})


# Which part of the request DRF's own errors are about.
_DRF_FIELDS: tuple[tuple[type[Exception], str], ...] = (
    (exceptions.NotAuthenticated, "authorization"),
    (exceptions.AuthenticationFailed, "authorization"),
    (exceptions.PermissionDenied, "authorization"),
    (exceptions.Throttled, "authorization"),
    (exceptions.UnsupportedMediaType, "content_type"),
    (exceptions.ParseError, "body"),
    (exceptions.MethodNotAllowed, "method"),
    (exceptions.NotAcceptable, "accept"),
)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """`REST_FRAMEWORK["EXCEPTION_HANDLER"]`: bad input answers `{error, field}` with the status its
    flavour says; DRF's own errors (authentication, permission, parse) take the same shape, and so
    do a body over Django's size limit (413) and an unexpected error (500, logged)."""
    if isinstance(exc, RequestDataTooBig):
        exc = TooLarge("body", f"is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes")
    if isinstance(exc, InvalidInput):
        headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Throttled) else None
        return Response(exc.as_dict(), status=http_status(exc), headers=headers)
    if connection_lost(exc):
        return None  # DRF raises it on: `db_connection` retries the view or answers 503
    response = drf_exception_handler(exc, context)
    if response is None:
        log.error("unexpected error in %s", context.get("view"), exc_info=exc)
        set_rollback()
        return Response(internal_error(), status=500)
    if isinstance(response.data, dict) and "detail" in response.data:
        field = next((name for kind, name in _DRF_FIELDS if isinstance(exc, kind)), "request")
        error = str(response.data["detail"])
        if isinstance(exc, exceptions.UnsupportedMediaType):  # a form or multipart post, any non-empty body
            request = context.get("request")
            error = f"{JSON_ONLY}, not {getattr(request, 'content_type', '') or 'no content type'}"
        response.data = {"error": error, "field": field}
    return response


def json_object(request: Request, allowed: set[str]) -> dict[str, Any]:
    """The request body as a JSON object whose keys are all in `allowed` (an unknown key is named)."""
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("body", f"must be a JSON object with {', '.join(sorted(allowed))}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InvalidInput(unknown[0], f"unknown field (expected {', '.join(sorted(allowed))})")
    return data


class SchemaView(SpectacularAPIView):
    """The OpenAPI schema, behind login (SERVE_PERMISSIONS); JSON unless `?format=yaml`, so its
    refusals are JSON like every other /api/ answer."""

    renderer_classes = [OpenApiJsonRenderer, OpenApiJsonRenderer2, OpenApiYamlRenderer, OpenApiYamlRenderer2]
