"""Schemathesis against the API's own OpenAPI schema (`/api/schema/`, fetched with a token like
any client): for every operation it generates valid requests and invalid ones (wrong types, out
of the declared bounds, missing fields) and checks that no answer is a server error and every
answer matches what the schema says for its status. A small example budget keeps it to about a
minute on two cores; `HELIOS_SCHEMATHESIS_EXAMPLES` raises it."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from heliosweb.telemetry.tokens import user_token_issue

EXAMPLES = int(os.environ.get("HELIOS_SCHEMATHESIS_EXAMPLES", "8"))
# The engine policy long-poll waits for a change by design (up to its `wait`): not a fuzzing target.
SKIP = {("GET", "/api/recipes/{name}/policy")}


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


@pytest.mark.django_db
def test_no_generated_request_gets_a_server_error_or_an_answer_off_its_schema(
    maintainer, recipe, done_job, queued, wsgi_app
):
    # identity: the in-process WSGI client does not undo the gzip an HTTP client would (test_headers checks it)
    auth = {"Authorization": f"Bearer {user_token_issue(user=maintainer)}", "Accept-Encoding": "identity"}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app, headers=auth)
    checked = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if (operation.method.upper(), operation.path) in SKIP:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            def call(case):
                response = case.call(headers=auth)
                case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])

            call()
        checked.append(f"{operation.method.upper()} {operation.path}")
    assert {"POST /api/jobs/", "POST /api/recipes/{name}/boots/", "GET /api/jobs/{job_id}/"} <= set(checked)
