"""A drf-spectacular postprocessing hook: what the schema says once for every operation, where the
answer comes from outside the view (authentication, the engine-token scope, the token throttle, an
outage, the web server's bounds, no NUL in a query parameter or a JSON body's string, bodies that
refuse unknown keys). A view's own description of a status wins."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from .db_connection import RETRY_AFTER_S

_RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer", "minimum": 0}, "description": "seconds to wait"}}

# status: (why, extra headers), for every operation.
_ANY_REQUEST: dict[str, tuple[str, dict[str, Any]]] = {
    "400": ("a bad query string (a NUL) or a Host the server does not serve", {}),
    "401": (
        "no credentials, or a wrong token",
        {"WWW-Authenticate": {"schema": {"type": "string"}, "description": 'Bearer realm="api"'}},
    ),
    "403": ("credentials that do not allow it (a missing permission, an engine token off its routes)", {}),
    "408": ("the request line, headers or body did not arrive in time", {}),
    "414": ("a request line over 16,384 bytes", {}),
    "429": ("too many wrong tokens from this address; Retry-After says when to try again", _RETRY_AFTER),
    "431": ("a header line or all headers over 16,384 bytes", {}),
    "503": (f"the database or Redis is away; Retry-After ({RETRY_AFTER_S} s) says when to ask again", _RETRY_AFTER),
}
_WITH_BODY: dict[str, tuple[str, dict[str, Any]]] = {
    "403": ("a browser session's post without its CSRF token, or a missing permission", {}),
    "413": (f"a body over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes", {}),
    "415": ("a body that is not JSON, or compressed other than gzip", {}),
}
_BODY_METHODS = ("post", "put", "patch")
_NO_NUL = "^[^\\u0000]*$"

# Components of JSON bodies that refuse any other key (`common.api.json_body`), each with the keys
# of which exactly one must be given (none: no such rule).
closed_bodies: dict[str, tuple[str, ...]] = {}


def _has_required(schema: dict[str, Any], schemas: dict[str, Any]) -> bool:
    ref = schema.get("$ref", "")
    target = schemas.get(ref.rsplit("/", 1)[-1], {}) if ref else schema
    return bool(target.get("required")) or any(_has_required(v, schemas) for v in target.get("oneOf", []))


def _no_nul_strings(schema: Any, schemas: dict[str, Any], seen: frozenset[str] = frozenset()) -> None:
    """Give every string in a JSON body's schema that has no `enum` or `pattern` of its own the
    no-NUL one: `common.bounds.parse_json` refuses a NUL in any string of a body (each component once
    on a path)."""
    if isinstance(schema, list):
        for item in schema:
            _no_nul_strings(item, schemas, seen)
        return
    if not isinstance(schema, dict):
        return
    ref = schema.get("$ref", "").rsplit("/", 1)[-1]
    if ref in schemas and ref not in seen:
        _no_nul_strings(schemas[ref], schemas, seen | {ref})
    if schema.get("type") == "string" and schema.get("format") != "binary" and not {"enum", "pattern"} & set(schema):
        schema["pattern"] = _NO_NUL
    for value in schema.values():
        _no_nul_strings(value, schemas, seen)


def add_common_refusals(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Declare the refusals from outside each view, and `additionalProperties: false` on closed bodies."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    schemas = result.get("components", {}).get("schemas", {})
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            body = operation.get("requestBody")
            if body is not None and any(
                _has_required(media.get("schema", {}), schemas) for media in body["content"].values()
            ):
                body["required"] = True  # no body at all is refused too: the first field it lacks is named
            if body is not None and "application/json" in body["content"]:
                _no_nul_strings(body["content"]["application/json"].get("schema"), schemas)
            refusals = {**_ANY_REQUEST, **(_WITH_BODY if method in _BODY_METHODS else {})}
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if (
                    parameter["in"] == "query"
                    and schema.get("type") == "string"
                    and not {"enum", "pattern"} & set(schema)
                ):
                    schema["pattern"] = _NO_NUL  # `common.query_text` refuses a NUL anywhere in a query
            responses = operation.setdefault("responses", {})
            for status, (why, headers) in refusals.items():
                declared = responses.setdefault(status, {"description": why, "content": error})
                if headers:
                    declared.setdefault("headers", {}).update(headers)
    for name, one_of in closed_bodies.items():
        for component in (name, f"Patched{name}"):  # drf-spectacular's name for a PATCH body
            if "properties" in schemas.get(component, {}):  # not a oneOf of closed variants (`jobs.schema`)
                schemas[component]["additionalProperties"] = False
                if one_of:
                    schemas[component]["oneOf"] = [{"required": [key]} for key in one_of]
    return result
