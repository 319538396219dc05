"""A free-text body field's schema pattern says what the server takes (`require_text`): the text
stripped, no NUL, and, where the field is required, not blank. Both regex engines a schema's
reader may use judge it: Python's (Schemathesis generates strings with it) and jsonschema-rs
(Schemathesis validates with it). Issue 30: `^[^\\u0000]*\\S[^\\u0000]*$` took a lone NUL as its
one non-space character, so a comment of a NUL was schema-valid and refused."""

from __future__ import annotations

import re
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
        if prop.get("type") == "string" and prop.get("pattern", "").startswith("^[^\\u0000]*")
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
