"""The OpenAPI schema states each job kind's parameters, generated from the same declarations
that validate them: a value just past a bound the schema states is refused with 400 naming the
parameter, a value on the bound is not refused for its bound, and nothing past one is stored."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from rest_framework.test import APIClient

from heliosweb.jobs.models import BenchmarkJob
from heliosweb.jobs.registry import job_kinds
from scheduler_core.analyses import ANALYSES


@pytest.fixture
def api(maintainer, settings) -> APIClient:
    settings.HELIOS_MAX_QUEUED_JOBS_PER_USER = 10_000  # jobs on a bound are accepted, many of them
    client = APIClient()
    client.force_authenticate(maintainer)
    return client


@pytest.fixture
def schemas(api) -> dict[str, Any]:
    response = api.get("/api/schema/?format=json")
    assert response.status_code == 200
    return response.json()["components"]["schemas"]


BOUND_REFUSAL = re.compile(r"must be [<>]= \S+, got")  # scheduler_core.validation's words


def just_past(schema: dict[str, Any], bound: str) -> Any:
    value = schema[bound]
    step = 1 if bound == "maximum" else -1
    return value + step if schema["type"] == "integer" else math.nextafter(value, step * math.inf)


def declared(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's own schema (a catalog's is also offered as stored boot ids: `anyOf`)."""
    return schema["anyOf"][0] if "anyOf" in schema else schema


def scalar(schema: dict[str, Any]) -> dict[str, Any]:
    """A number's schema, or a list's items' schema."""
    return schema["items"] if schema.get("type") == "array" else schema


def stated_bounds(schemas: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], str]]:
    """(kind, parameter, its schema, "minimum" or "maximum") for every bound a kind's params state
    on a number or on a list's numbers (an old name's bounds are its new name's, checked there)."""
    out = []
    for kind in job_kinds():
        for name, schema in schemas[f"JobParams.{kind}"]["properties"].items():
            if not schema.get("deprecated"):
                out += [(kind, name, schema, b) for b in ("minimum", "maximum") if b in scalar(schema)]
    return out


def as_param(schema: dict[str, Any], number: Any) -> Any:
    return [number] if schema.get("type") == "array" else number


def post(api: APIClient, kind: str, params: dict[str, Any]):
    return api.post("/api/jobs/", {"kind": kind, "recipe": "tiny-cpu", "params": params}, format="json")


def test_job_create_is_one_variant_per_kind_told_apart_by_kind(schemas):
    create = schemas["JobCreate"]
    assert create["discriminator"]["propertyName"] == "kind"
    assert set(create["discriminator"]["mapping"]) == set(job_kinds())
    pulse = schemas["JobCreate.pulse"]
    assert pulse["properties"]["kind"]["enum"] == ["pulse"] and pulse["additionalProperties"] is False
    assert schemas["JobParams.pulse"] == {
        "type": "object",
        "properties": {
            "count": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1_000_000,
                "default": 200,
                "description": "number of events",
            },
            "rate": {
                "type": "number",
                "minimum": 0.1,
                "maximum": 5000.0,
                "default": 100.0,
                "description": "events per second",
            },
        },
        "additionalProperties": False,
    }


def test_the_schema_states_every_declared_parameter_with_its_bounds_and_choices(schemas):
    for name, kind in job_kinds().items():
        stated = schemas[f"JobParams.{name}"]["properties"]
        assert list(stated) == [p.name for p in kind.analysis.params] + list(kind.analysis.aliases)
        for old, now in kind.analysis.aliases.items():  # an old name: deprecated, the new one's schema
            assert stated[old]["deprecated"] is True and stated[old].get("maximum") == stated[now].get("maximum")
            assert "default" not in stated[old]  # a generated client would send it beside the new name
        for p in kind.analysis.params:
            spec = p.to_dict()
            schema = declared(stated[p.name])
            for bound in ("minimum", "maximum"):
                assert scalar(schema).get(bound) == spec[bound], (name, p.name, bound)
            if spec["kind"].endswith("_list"):  # (a catalog states its own graph count: 256)
                assert schema.get("maxItems") == spec["max_items"], (name, p.name)
            if spec["choices"] and spec["kind"] == "choice":
                assert stated[p.name]["enum"] == spec["choices"]


def test_a_value_just_past_a_stated_bound_is_refused_naming_the_parameter(api, recipe, schemas):
    bounds = stated_bounds(schemas)
    assert len(bounds) > 50 and {("pulse", "count", "maximum"), ("pr22", "fixed_ms", "minimum")} <= {
        (k, n, b) for k, n, _, b in bounds
    }
    accepted = 0
    for kind, name, schema, bound in bounds:
        response = post(api, kind, {name: as_param(schema, just_past(scalar(schema), bound))})
        assert response.status_code == 400, (kind, name, bound, response.content)
        field = f"params.{name}[]" if schema.get("type") == "array" else f"params.{name}"
        assert response.json()["field"] == field, (kind, name, bound, response.json())
        on_bound = post(api, kind, {name: as_param(schema, scalar(schema)[bound])})
        # On the bound the value itself is fine; another rule (a run too large, min above max) may still refuse.
        accepted += on_bound.status_code == 201
        assert on_bound.status_code == 201 or not BOUND_REFUSAL.search(on_bound.json()["error"]), (kind, name, bound)
    assert BenchmarkJob.objects.count() == accepted  # the jobs stored are those on a bound, none past one


def test_a_list_longer_than_its_stated_max_items_is_refused_naming_the_parameter(api, recipe, schemas):
    lists = [
        (kind, name, schema)
        for kind in job_kinds()
        for name, schema in schemas[f"JobParams.{kind}"]["properties"].items()
        if schema.get("type") == "array" and "maxItems" in schema and "minimum" in schema["items"]
    ]
    assert any(kind == "boots" and name == "prompts" for kind, name, _ in lists)
    for kind, name, schema in lists:
        low = schema["items"]["minimum"]
        response = post(api, kind, {name: list(range(low, low + schema["maxItems"] + 1))})
        assert response.status_code == 400 and response.json()["field"] == f"params.{name}", (kind, name)
    assert not BenchmarkJob.objects.exists()


def test_a_value_outside_a_stated_enum_is_refused_naming_the_parameter(api, recipe, schemas):
    choices = [
        (kind, name)
        for kind in job_kinds()
        for name, schema in schemas[f"JobParams.{kind}"]["properties"].items()
        if "enum" in schema
    ]
    assert ("sweep", "spacing") in choices
    for kind, name in choices:
        response = post(api, kind, {name: "not-one-of-them"})
        assert response.status_code == 400 and response.json()["field"] == f"params.{name}", (kind, name)
    assert not BenchmarkJob.objects.exists()


def test_a_job_states_where_its_catalogs_came_from(schemas):
    sources = schemas["Job"]["properties"]["catalog_sources"]
    assert sources["type"] == "object" and sources["nullable"] is True
    assert sources["additionalProperties"]["items"]["type"] == "object"  # one entry per boot named
    assert "from_boots" in sources["description"]
    engine = schemas["JobParams.engine"]["properties"]["catalog"]
    assert "boot-repaired" in engine["enum"]


JSONL = "\n".join(f'{{"arrival_ms": {i * 100}, "prompt_tokens": {50 + i}, "output_tokens": 2}}' for i in range(30))


def test_a_trace_given_as_text_is_stored_as_records_and_a_bad_row_names_its_line(api, recipe):
    response = post(api, "simulate", {"trace": JSONL, "limit": 5, "execution": "llama-2-7b-a100"})
    assert response.status_code == 201, response.content
    job = BenchmarkJob.objects.get()
    assert [r["prompt_tokens"] for r in job.params["trace"]] == [50 + i for i in range(30)]
    assert job.params["limit"] == 5 and job.params["execution"] == "llama-2-7b-a100"
    analysis = ANALYSES["simulate"]
    result = analysis.run(analysis.from_json(job.params), lambda event: None)  # what the worker runs
    assert result["requests"] == 5 and result["execution"]["execution"] == "llama-2-7b-a100"
    bad = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,4808,ten\n"
    response = post(api, "capacity", {"trace": bad})
    assert response.status_code == 400 and response.json()["field"] == "params.trace"
    assert "line 2, column GeneratedTokens" in response.json()["error"]
    for params in ({"window": [0, 10]}, {"trace": JSONL, "execution": "llama-2-7b-v100"}):
        assert post(api, "simulate", params).status_code == 400
    assert BenchmarkJob.objects.count() == 1
