"""What every JSON endpoint shares: the error shape `{error, field}` (and its schema), the one
exception handler that produces it, and reading a JSON object body with known fields."""

from __future__ import annotations

from typing import Any

from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.utils import inline_serializer
from drf_spectacular.views import SpectacularAPIView
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from scheduler_core.errors import InvalidInput

from .errors import Throttled, http_status

ERROR = inline_serializer("Error", {"error": serializers.CharField(), "field": serializers.CharField()})


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """`REST_FRAMEWORK["EXCEPTION_HANDLER"]`: bad input answers `{error, field}` with the status its
    flavour says; DRF's own errors (authentication, permission, parse) take the same shape."""
    if isinstance(exc, Throttled):
        return Response(exc.as_dict(), status=429, headers={"Retry-After": str(exc.retry_after)})
    if isinstance(exc, InvalidInput):
        return Response(exc.as_dict(), status=http_status(exc))
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "detail" in response.data:
        response.data = {
            "error": str(response.data["detail"]),
            "field": "authorization" if response.status_code in (401, 403, 429) else "request",
        }
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
