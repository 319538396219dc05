"""A free-text body field's schema pattern says what the server takes (`require_text`): the text
stripped, no NUL, and, where the field is required, not blank. Both regex engines a schema's
reader may use judge it: Python's (Schemathesis generates strings with it) and jsonschema-rs
(Schemathesis validates with it). Issue 30: `^[^\\u0000]*\\S[^\\u0000]*$` took a lone NUL as its
one non-space character, so a comment of a NUL was schema-valid and refused. And no string of a
JSON body takes a NUL in the schema, as none does on the server."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest
from drf_spectacular.generators import SchemaGenerator

from scheduler_core.errors import InvalidInput
from scheduler_core.validation import require_text

SAMPLES = ["", "a", " a ", "\x00", " \x00 ", "a\x00", "\x1f", "\u3000", "\u2028", "\ufeff", "\x85 b"]


def text_fields() -> list[tuple[str, dict[str, Any], bool]]:
    """(component.property, schema, required) of every string the schema reads as free text."""
    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    return [
        (f"{name}.{key}", prop, key in component.get("required", []))
        for name, component in components.items()
        for key, prop in component.get("properties", {}).items()
        if prop.get("type") == "string" and "maxLength" in prop and prop.get("pattern", "").startswith("^[^\\u0000]*")
    ]


def server_takes(text: str, required: bool) -> bool:
    try:
        require_text(text, "text", max_length=100, required="required" if required else "")
    except InvalidInput:
        return False
    return True


@pytest.mark.parametrize(("schema", "required"), [pytest.param(s, r, id=f) for f, s, r in text_fields()])
def test_a_text_fields_pattern_takes_what_the_server_takes(schema: dict[str, Any], required: bool):
    validator = jsonschema_rs.validator_for({"type": "string", "pattern": schema["pattern"]})
    for text in SAMPLES:
        takes = server_takes(text, required)
        assert (re.search(schema["pattern"], text) is not None) is takes, ("python re", text)
        assert validator.is_valid(text) is takes, ("jsonschema-rs", text)


def test_some_text_fields_are_required():
    assert {"CommentBody.body", "DecisionPropose.rationale"} <= {f for f, _, required in text_fields() if required}


def strings(schema: Any, components: dict[str, Any], seen: frozenset[str] = frozenset()) -> Iterator[dict[str, Any]]:
    """Every string schema in `schema`, through its references (each component once on a path)."""
    if isinstance(schema, list):
        for item in schema:
            yield from strings(item, components, seen)
    elif isinstance(schema, dict):
        ref = schema.get("$ref", "").rsplit("/", 1)[-1]
        if ref and ref not in seen:
            yield from strings(components[ref], components, seen | {ref})
        if schema.get("type") == "string" and schema.get("format") != "binary":
            yield schema
        for value in schema.values():
            yield from strings(value, components, seen)


def test_no_string_a_json_body_declares_takes_a_nul():
    # `common.bounds.parse_json` refuses a NUL in any string of a JSON body, so no body's schema may
    # take one (issue 30: a replay's `engine` was any string, and schemathesis sent a NUL in it).
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    bodies = [
        media["schema"]
        for operations in schema["paths"].values()
        for operation in operations.values()
        for media_type, media in operation.get("requestBody", {}).get("content", {}).items()
        if media_type == "application/json"
    ]
    found = [s for body in bodies for s in strings(body, components)]
    assert len(found) > 20
    takes = [s for s in found if jsonschema_rs.validator_for(s).is_valid("a\x00b")]
    assert not takes, takes
