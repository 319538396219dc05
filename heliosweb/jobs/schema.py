"""The job kinds in the OpenAPI schema: `JobCreate` is one variant per kind (`oneOf`, told apart by
`kind`), and each kind's `params` its own component, built from the same `Param` declarations
that validate a job, build the form and the CLI: the schema states the bounds the server enforces.

A drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS), because the kinds are data (apps
register theirs at start) and DRF serializers cannot say "this object's shape depends on `kind`"."""

from __future__ import annotations

from typing import Any

from heliosweb.common.bounds import DB_INT_MAX
from scheduler_core.analyses.contract import Param
from scheduler_core.analyses.params import CatalogListParam, CatalogParam

from .registry import JobKind, job_kinds

_BOOT_ID = {"type": "integer", "minimum": 1, "maximum": DB_INT_MAX}
_REPAIRED = {"type": "boolean", "description": "the boots' repaired versions (flagged shapes replaced)"}


def add_job_kinds_to_openapi(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Replace the generic `JobCreate` (params: any object) with one variant per job kind."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    variants, mapping = [], {}
    for kind in sorted(job_kinds().values(), key=lambda k: k.name):
        needs_recipe = bool(kind.analysis.needs_recipe)
        schemas[f"JobParams.{kind.name}"] = openapi_30(kind_params_schema(kind))
        params_required = bool(schemas[f"JobParams.{kind.name}"].get("required"))
        schemas[f"JobCreate.{kind.name}"] = {
            "type": "object",
            "description": kind.summary,
            "properties": {
                "kind": {"type": "string", "enum": [kind.name]},
                "recipe": {"type": "string", "nullable": not needs_recipe, "description": "a recipe's name"},
                "params": {"$ref": f"#/components/schemas/JobParams.{kind.name}"},
            },
            # `params` may be left out only when the kind's defaults fill every one of them
            "required": ["kind", *(["recipe"] if needs_recipe else []), *(["params"] if params_required else [])],
            "additionalProperties": False,
        }
        ref = f"#/components/schemas/JobCreate.{kind.name}"
        variants.append({"$ref": ref})
        mapping[kind.name] = ref
    schemas["JobCreate"] = {
        "description": "a job: its kind and that kind's parameters (see GET /api/kinds/); defaults fill the rest",
        "oneOf": variants,
        "discriminator": {"propertyName": "kind", "mapping": mapping},
    }
    return result


def kind_params_schema(kind: JobKind) -> dict[str, Any]:
    """The kind's declared parameters; a catalog may also be named by stored boot ids, as the
    submission service reads them."""
    schema = kind.analysis.params_schema()
    for p in kind.analysis.params:
        boots = _boot_reference(p)
        if boots is not None:
            schema["properties"][p.name] = {"anyOf": [schema["properties"][p.name], boots], "description": p.help}
    return schema


def _boot_reference(p: Param) -> dict[str, Any] | None:
    if isinstance(p, CatalogParam):
        ref, value = "boot", _BOOT_ID
    elif isinstance(p, CatalogListParam):
        ref, value = "boots", {"type": "array", "items": _BOOT_ID, "minItems": 1}
    else:
        return None
    return {
        "type": "object",
        "properties": {ref: value, "repaired": _REPAIRED},
        "required": [ref],
        "additionalProperties": False,
    }


def openapi_30(schema: Any) -> Any:
    """JSON Schema as OpenAPI 3.0 says it: `null` as `nullable`, not as a type."""
    if isinstance(schema, list):
        return [openapi_30(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: openapi_30(v) for k, v in schema.items()}
    types = out.get("type")
    if isinstance(types, list) and "null" in types:
        rest = [t for t in types if t != "null"]
        out["type"], out["nullable"] = rest[0], True  # one type besides null in our declarations
    options = out.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [o for o in options if o != {"type": "null"}]
        out.pop("anyOf")
        if len(rest) == 1:
            out = {**rest[0], **out, "nullable": True}
        else:
            out.update(anyOf=rest, nullable=True)
    return out
