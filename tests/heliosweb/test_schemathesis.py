"""Schemathesis against the API's own OpenAPI schema (`/api/schema/`, fetched with a token like
any client), with its default checks: for every operation it generates valid requests and invalid
ones (wrong types, out of the declared bounds, missing fields, unknown keys) and checks that no
answer is a server error, every status and body is the one the schema declares, a request the
schema allows is not refused as bad input, one it forbids is refused, and credentials are checked.
A small example budget keeps it to a few minutes on two cores; `HELIOS_SCHEMATHESIS_EXAMPLES`
raises it. Every failure is collected and listed at once (operation, mode, check, one request)."""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode

from heliosweb.telemetry.tokens import user_token_issue

EXAMPLES = int(os.environ.get("HELIOS_SCHEMATHESIS_EXAMPLES", "8"))
# The engine policy long-poll waits for a change by design (up to its `wait`): not a fuzzing target.
SKIP = {("GET", "/api/recipes/{name}/policy")}
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


def name_stored_rows(body: Any, *, recipe: str, job: int) -> None:
    """A schema says a field is a recipe's name or a job's id, not which ones exist: a valid
    request names stored ones (an unknown one is bad input, 400, by design)."""
    if isinstance(body, dict):
        if "recipe" in body:
            body["recipe"] = recipe
        if "evidence" in body:
            body["evidence"] = [job]
        body.pop("rollback_of", None)  # the applied decision a rollback reverts: none is stored here


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
            name_stored_rows(case.body, **stored)
        response = case.call(headers=auth)
        try:
            case.validate_response(response, headers=auth)  # checks=None: the default checks
        except FailureGroup as group:
            for failure in group.exceptions:
                key = (name, mode.value, failure.title)
                shown = f"{case.as_curl_command()[:300]} -> {response.status_code} {response.text[:200]}"
                failures.setdefault(key, [0, shown])[0] += 1

    call()


@pytest.mark.django_db
def test_no_generated_request_gets_an_answer_the_schema_does_not_declare(
    maintainer, recipe, done_job, queued, wsgi_app, settings: Any
):
    # The ignored-auth check sends wrong tokens: at the default 10 a minute the address would be
    # throttled (429, declared) for the rest of the run, and nothing else would be tested.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token_failure": "100000/min"}}
    # identity: the in-process WSGI client does not undo the gzip an HTTP client would (test_headers checks it)
    auth = {"Authorization": f"Bearer {user_token_issue(user=maintainer)}", "Accept-Encoding": "identity"}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app, headers=auth)
    failures: Failures = {}
    checked = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if (operation.method.upper(), operation.path) in SKIP:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(operation, mode, auth, {"recipe": recipe.name, "job": done_job.pk}, failures)
        checked.append(f"{operation.method.upper()} {operation.path}")
    assert {"POST /api/jobs/", "POST /api/recipes/{name}/boots/", "GET /api/jobs/{job_id}/"} <= set(checked)
    found = [f"{n} x {op} ({mode}): {title}\n    {shown}" for (op, mode, title), (n, shown) in failures.items()]
    assert not failures, f"{sum(n for n, _ in failures.values())} failing requests:\n" + "\n".join(found)
