"""What every JSON endpoint shares: the error shape `{error, field}` (and its schema), the one
exception handler that produces it, and reading a JSON object body with known fields."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.utils import OpenApiParameter, extend_schema_field, inline_serializer
from drf_spectacular.views import SpectacularAPIView
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from scheduler_core.errors import InvalidInput

from .bounds import DB_INT_MAX
from .db_connection import LOST
from .errors import Throttled, TooLarge, http_status, internal_error
from .http_errors import JSON_ONLY
from .inputs import query_int, query_limit
from .openapi import closed_bodies

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
    """`REST_FRAMEWORK["EXCEPTION_HANDLER"]`: `{error, field}` with the status of its flavour for bad
    input, DRF's own errors, a body over Django's limit (413) and an unexpected error (500, logged)."""
    if isinstance(exc, RequestDataTooBig):
        exc = TooLarge("body", f"is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes")
    if isinstance(exc, InvalidInput):
        headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Throttled) else None
        return Response(exc.as_dict(), status=http_status(exc), headers=headers)
    if isinstance(exc, LOST):
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


# What `str.strip` strips (`require_text` strips before it finds a text blank), spelled out: `\S`
# differs between regex engines (U+001C-U+001F, U+FEFF); no character above U+3000 is a space.
_NOT_BLANK = "[^\\u0000" + "".join(f"\\u{ord(c):04x}" for c in map(chr, range(0x3001)) if c.isspace()) + "]"


def text_field(*, max_length: int, required: bool = False, **kwargs: Any) -> serializers.Field:
    """A free-text body field as `require_text` reads it: bounded, no NUL; `required`: not blank
    (one character neither a space nor a NUL)."""
    regex = rf"^[^\u0000]*{_NOT_BLANK}[^\u0000]*$" if required else r"^[^\u0000]*$"
    return serializers.RegexField(regex, max_length=max_length, required=required, **kwargs)


def schema_field(schema: dict[str, Any], **kwargs: Any) -> serializers.Field:
    """A body field declared by the JSON schema given: a value the server parses itself, by that
    parser's own schema (a `scheduler_core` one), or a multipart file's bytes."""
    field_class = type("SchemaField", (serializers.JSONField,), {})  # a class of its own: fields are copied
    return extend_schema_field(schema)(field_class)(**kwargs)


def json_body(
    name: str, fields: dict[str, serializers.Field], *, one_of: tuple[str, ...] = (), **kwargs: Any
) -> serializers.Serializer:
    """A JSON object's one declaration (a body, or an object in one, read closed): the schema's
    component (`additionalProperties: false`, by `common.openapi`) and the keys `json_object`
    accepts; `one_of`: keys of which exactly one is given."""
    closed_bodies[name] = one_of
    return inline_serializer(name, fields, **kwargs)


def json_object(request: Request, body: serializers.Serializer) -> dict[str, Any]:
    """The request body as a JSON object whose keys are all fields of `body` (an unknown key is named)."""
    allowed = set(body.fields)
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("body", f"must be a JSON object with {', '.join(sorted(allowed))}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InvalidInput(unknown[0], f"unknown field (expected {', '.join(sorted(allowed))})")
    return data


@dataclass(frozen=True)
class QueryInt:
    """A query-string integer declared once: what the view reads (`read`) and what the schema says
    (`parameter`). With `most` it is a `?limit=`: at least 1, a larger one read as `most`."""

    name: str
    default: int
    minimum: int = 0
    most: int | None = None
    description: str = ""

    def read(self, params: Mapping[str, str]) -> int:
        if self.most is not None:
            return query_limit(params, default=self.default, most=self.most)
        return query_int(params, self.name, default=self.default, minimum=self.minimum)

    def parameter(self) -> OpenApiParameter:
        if self.most is not None:  # any larger number reads as `most`
            schema = {"type": "integer", "minimum": 1}
            most = f"; at most {self.most} (a larger one reads as {self.most})"
        else:
            schema, most = {"type": "integer", "minimum": self.minimum, "maximum": DB_INT_MAX}, ""
        description = f"{self.description or self.name}{most}; default {self.default}"
        return OpenApiParameter(self.name, schema, description=description)


class SchemaView(SpectacularAPIView):
    """The OpenAPI schema, behind login; JSON unless `?format=yaml`, so its refusals are JSON like all /api/."""

    renderer_classes = [OpenApiJsonRenderer, OpenApiJsonRenderer2, OpenApiYamlRenderer, OpenApiYamlRenderer2]
