"""Schemathesis against the API's own OpenAPI schema (`/api/schema/`, fetched with a token like
any client), with its default checks: for every operation it generates valid requests and invalid
ones (wrong types, out of the declared bounds, missing fields, unknown keys) and checks that no
answer is a server error, every status and body is the one the schema declares, a request the
schema allows is not refused as bad input, one it forbids is refused, and credentials are checked.
A small example budget keeps it to a few minutes on two cores; `HELIOS_SCHEMATHESIS_EXAMPLES`
raises it. Every failure is collected and listed at once (operation, mode, check, one request)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, find, given
from hypothesis import settings as hypothesis_settings
from schemathesis.core import NOT_SET
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode

from heliosweb.decisions.services import decision_propose
from heliosweb.jobs.registry import job_kinds
from heliosweb.recipes.models import PolicySetting
from heliosweb.telemetry.tokens import user_token_issue
from scheduler_core.analyses.contract import Analysis
from scheduler_core.analyses.params import CatalogListParam, CatalogParam
from scheduler_core.analyses.simulate import MAX_LANES
from scheduler_core.policies import selectable_policies

EXAMPLES = int(os.environ.get("HELIOS_SCHEMATHESIS_EXAMPLES", "8"))
# The engine policy long-poll waits for a change by design (up to its `wait`): not a fuzzing target.
SKIP = {("GET", "/api/recipes/{name}/policy")}
TRACE = b'{"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 4}\n{"arrival_ms": 250, "prompt_tokens": 137, "output_tokens": 2}\n'
# A boot's catalog as a job's parameters take it inline: solo prefill graphs, and decode graphs with
# as many rows as any run admits lanes.
BOOT = [
    {"prefill": 1024, "decode": 0, "ms": 5.0},
    {"prefill": 2048, "decode": 0, "ms": 10.0},
    {"prefill": 0, "decode": MAX_LANES, "ms": 4.0},
]
TRACE_RECORDS = [json.loads(line) for line in TRACE.splitlines()]
Failures = dict[tuple[str, str, str], list[Any]]  # (operation, mode, check) -> [requests, the first one]


@pytest.fixture
def wsgi_app():
    """Django's WSGI app inside the test's transaction: like Django's test client, keep each
    request from closing the database connection the test holds."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def valid_beyond_the_schema(body: Any, stored: dict[str, Any]) -> Any:
    """What JSON Schema cannot say, made true of a valid request: the recipe, job and policy it names
    exist (and the policy is not already the recipe's: proposing that is refused), a catalog has
    no duplicate shape and a solo prefill graph, a plan's request fits its catalog and its
    execution table times the catalog's shapes, a job's parameters fit one another where JSON
    Schema cannot compare two values (`job_params_fit`), a trace upload (raw or a multipart `file`) is a trace. The
    server refuses each otherwise, as bad input naming the field (400)."""
    if isinstance(body, bytes):  # a raw trace upload
        return TRACE
    if not isinstance(body, dict):
        return body
    if "file" in body:  # a multipart trace upload: as text, the string the schema checks a `binary` against
        body["file"] = TRACE.decode()
    body.pop("rollback_of", None)  # the applied decision a rollback reverts: none is stored here
    known = {
        "recipe": stored["recipe"],
        "evidence": [stored["job"]],
        "policy": stored["policy"],
        "shapes": [{"prefill": 2048, "decode": 0}],
        "catalog": [{"prefill": 2048, "decode": 0, "ms": 10.0}],
        "request": {"prompt_tokens": 3000},
    }
    body.update({key: value for key, value in known.items() if key in body})
    if isinstance(body.get("execution"), dict) and "table" in body["execution"]:
        body["execution"]["table"] = known["catalog"]
    if isinstance(body.get("params"), dict) and body.get("kind") in job_kinds():
        job_params_fit(body["params"], job_kinds()[body["kind"]].analysis)
    if "policies" in body:
        body["policies"] = sorted(set(body["policies"]))  # each once
    return body


def job_params_fit(params: dict[str, Any], analysis: Analysis[Any]) -> None:
    """A job's inline trace is a trace, its window holds some of it, an inline boot catalog is one
    (`BOOT`, under its name or its old one), its drift capacities are among its capacities (the
    boot's when one is given), and each `X_min` is at most its `X_max` (swapped when not, a default standing
    in for one not given)."""
    declared = analysis.params
    if params.get("trace") is not None:
        params["trace"] = TRACE.decode() if isinstance(params["trace"], str) else TRACE_RECORDS
        if params.get("window") is not None:
            params["window"] = [0, 1]
    defaults = {p.name: p.default_value() for p in declared}
    capacities = params.get("capacities") or defaults.get("capacities")
    for p in declared:  # an inline catalog (a boot's shapes): no duplicate shape, a solo prefill graph, decode rows
        for name in (p.name, *(old for old, now in analysis.aliases.items() if now == p.name)):
            if isinstance(p, CatalogParam) and isinstance(params.get(name), list):
                params[name] = BOOT
                capacities = [g["prefill"] for g in BOOT if g["decode"] == 0]  # the boot's, in place of `capacities`
            elif isinstance(p, CatalogListParam) and isinstance(params.get(name), list):
                params[name] = [BOOT if isinstance(c, list) else c for c in params[name]]
    if params.get("drift_capacities"):
        params["drift_capacities"] = capacities[:1]
    for low in [name for name in defaults if "_min" in name]:
        high = low.replace("_min", "_max", 1)
        values = (params.get(low, defaults[low]), params.get(high, defaults.get(high)))
        if all(isinstance(v, (int, float)) for v in values) and values[0] > values[1]:
            params[low], params[high] = values[1], values[0]


def valid_case(case: Any, stored: dict[str, Any]) -> None:
    """A positive case made valid beyond the schema (`valid_beyond_the_schema`), naming no policy a
    job ran. A case sent without its optional body stays without one: assigning `case.body` makes
    Schemathesis judge the body again, and it judges an absent body invalid even where the schema
    makes it optional, so the case would be checked as a negative one and its 200 reported as a
    "Schema-violating request accepted" (issue 30: a bodiless decision step)."""
    if case.body is not NOT_SET:
        case.body = valid_beyond_the_schema(case.body, stored)
    for pair in ("before", "after"):  # policies the job ran: none of the stored ones ran any
        (case.query or {}).pop(pair, None)


def fuzz(
    operation: Any, mode: GenerationMode, auth: dict[str, str], stored: dict[str, Any], failures: Failures
) -> None:
    """`EXAMPLES` requests of one operation in one mode, each answer run through the default checks;
    every failure counted under (operation, mode, check) with the first request that showed it."""
    name = f"{operation.method.upper()} {operation.path}"

    @given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis_settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def call(case: Any) -> None:
        if mode is GenerationMode.POSITIVE:
            valid_case(case, stored)
        response = case.call(headers=auth)
        try:
            case.validate_response(response, headers=auth)  # checks=None: the default checks
        except FailureGroup as group:
            for failure in group.exceptions:
                key = (name, mode.value, failure.title)
                shown = f"{case.as_curl_command()[:300]} -> {response.status_code} {response.text[:200]}"
                failures.setdefault(key, [0, shown])[0] += 1

    call()


@pytest.fixture
def auth(maintainer, settings: Any) -> dict[str, str]:
    """A maintainer's token, as each generated request sends it."""
    # The ignored-auth check sends wrong tokens: at the default 10 a minute the address would be
    # throttled (429, declared) for the rest of the run, and nothing else would be tested.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token_failure": "100000/min"}}
    # identity: the in-process WSGI client does not undo the gzip an HTTP client would (test_headers checks it)
    return {"Authorization": f"Bearer {user_token_issue(user=maintainer)}", "Accept-Encoding": "identity"}


@pytest.fixture
def schema(auth, wsgi_app) -> Any:
    return schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app, headers=auth)


@pytest.fixture
def stored(recipe, done_job) -> dict[str, Any]:
    """The stored rows a valid request names (`valid_beyond_the_schema`)."""
    active = PolicySetting.objects.get(recipe=recipe).policy
    return {
        "recipe": recipe.name,
        "job": done_job.pk,
        "policy": next(p for p in selectable_policies() if p != active),
    }


@pytest.mark.django_db
def test_a_valid_request_without_its_optional_body_is_checked_as_valid(maintainer, recipe, schema, auth, stored):
    # issue 30: a decision step sent without its (optional) body, answered 200, was reported as a
    # "Schema-violating request accepted" once `case.body` had been assigned.
    decision = decision_propose(actor=maintainer, recipe=recipe.name, policy=stored["policy"], rationale="why")
    operation = schema["/api/decisions/{decision_id}/withdraw/"]["POST"]
    strategy = operation.as_strategy(path_parameters={"decision_id": decision.pk})
    case = find(strategy, lambda case: case.body is NOT_SET, settings=hypothesis_settings(database=None))
    valid_case(case, stored)
    assert case.meta.generation.mode is GenerationMode.POSITIVE
    response = case.call(headers=auth)
    assert response.status_code == 200
    case.validate_response(response, headers=auth)  # no failure: a FailureGroup otherwise


@pytest.mark.django_db
def test_no_generated_request_gets_an_answer_the_schema_does_not_declare(schema, auth, stored, queued):
    failures: Failures = {}
    checked = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if (operation.method.upper(), operation.path) in SKIP:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(operation, mode, auth, stored, failures)
        checked.append(f"{operation.method.upper()} {operation.path}")
    assert {"POST /api/jobs/", "POST /api/recipes/{name}/boots/", "GET /api/jobs/{job_id}/"} <= set(checked)
    found = [f"{n} x {op} ({mode}): {title}\n    {shown}" for (op, mode, title), (n, shown) in failures.items()]
    print(f"schemathesis: {sum(n for n, _ in failures.values())} failing requests", *found, sep="\n")
    assert not failures, "\n".join(found)
