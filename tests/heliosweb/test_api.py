"""The JSON API: 201/400/401/403/404 answers that name the field; nothing stored or queued on bad input."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from heliosweb.jobs.models import BenchmarkJob


@pytest.fixture
def api(maintainer) -> APIClient:
    client = APIClient()
    client.force_authenticate(maintainer)
    return client


def test_it_creates_a_job_and_answers_201_with_id_and_status(api, recipe, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/jobs/", {"kind": "pr22", "recipe": "tiny-cpu", "params": {}}, format="json")
    assert response.status_code == 201
    job = BenchmarkJob.objects.get()
    assert response.json() == {"id": job.pk, "status": "queued"}
    assert queued == [(job.pk, "sim")]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"kind": "nope"}, "kind"),
        ({"kind": "pr22", "params": {"fixed_ms": -5}}, "params.fixed_ms"),
        ({"kind": "pr22", "recipe": "ghost"}, "recipe"),
        ({"kind": "pr22", "extra": 1}, "extra"),
        ([1, 2], "body"),
    ],
)
def test_it_answers_400_naming_the_field_and_queues_nothing(api, recipe, queued, body, field):
    response = api.post("/api/jobs/", body, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert BenchmarkJob.objects.count() == 0 and queued == []


def test_it_refuses_anonymous_clients_and_non_maintainers(viewer, db, queued):
    assert APIClient().post("/api/jobs/", {"kind": "pr22"}, format="json").status_code in (401, 403)
    client = APIClient()
    client.force_authenticate(viewer)
    response = client.post("/api/jobs/", {"kind": "pr22"}, format="json")
    assert response.status_code == 403 and response.json()["field"] == "authorization"
    assert client.get("/api/jobs/").status_code == 200  # reading is fine
    assert BenchmarkJob.objects.count() == 0 and queued == []


def test_a_bearer_token_from_the_management_command_authenticates(maintainer, capsys):
    call_command("create_api_token", "maint")
    token = capsys.readouterr().out.strip()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.post("/api/jobs/", {"kind": "pr22"}, format="json").status_code == 201
    client.credentials(HTTP_AUTHORIZATION="Bearer not-a-token")
    assert client.get("/api/jobs/").status_code == 401


def test_it_shows_a_job_with_progress_result_and_error(api, maintainer, transactional_db):
    from heliosweb.jobs.services.runner import job_run
    from heliosweb.jobs.services.submission import job_create

    job = job_create(kind="pr22", user=maintainer)
    job_run(job_id=job.pk)
    data = api.get(f"/api/jobs/{job.pk}/").json()
    assert {"id", "kind", "status", "progress", "result", "error"} <= set(data)
    assert data["status"] == "done" and data["progress"]["percent"] == 100 and data["error"] is None
    assert len(data["result"]["arms"]) == 4
    assert "9 launches 238.10 ms" in data["summary"]  # the CLI's table, rendered from the stored result
    assert api.get("/api/jobs/").json()[0]["summary"] is None  # lists stay light
    events = api.get(f"/api/jobs/{job.pk}/events/?after=2").json()
    assert events[0]["seq"] == 3 and events[-1]["type"] == "done"


def test_unknown_ids_answer_404_naming_the_field(api, db):
    response = api.get("/api/jobs/999/")
    assert response.status_code == 404 and response.json()["field"] == "id"
    assert api.post("/api/jobs/999/cancel/").status_code == 404


def test_it_cancels_a_queued_job(api, maintainer, db):
    from heliosweb.jobs.services.submission import job_create

    job = job_create(kind="pr22", user=maintainer)
    response = api.post(f"/api/jobs/{job.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    again = api.post(f"/api/jobs/{job.pk}/cancel/")
    assert again.status_code == 409 and again.json()["field"] == "status"


def test_it_serves_a_recipes_active_policy_and_version(api, maintainer, recipe):
    from heliosweb.recipes.services import policy_set

    api.force_login(maintainer)  # the policy read is an async view: a session, not DRF's forced user
    assert (
        api.get("/api/recipes/tiny-cpu/policy").json().items()
        >= {"recipe": "tiny-cpu", "policy": "cost", "version": 1}.items()
    )
    policy_set(recipe=recipe, policy="rule")
    assert (
        api.get("/api/recipes/tiny-cpu/policy").json().items()
        >= {"recipe": "tiny-cpu", "policy": "rule", "version": 2}.items()
    )
    response = api.get("/api/recipes/nope/policy")
    assert response.status_code == 404 and response.json()["field"] == "recipe"


def test_the_kinds_endpoint_lists_declared_parameters(api):
    kinds = {k["name"]: k for k in api.get("/api/kinds/").json()}
    assert [p["name"] for p in kinds["pr22"]["params"]] == [
        "execution",
        "fixed_ms",
        "ms_per_token",
        "first_token_ms",
        "drift_factor",
    ]


def test_the_openapi_schema_documents_the_job_endpoints(api):
    response = api.get("/api/schema/?format=json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert {"/api/jobs/", "/api/jobs/{job_id}/", "/api/recipes/{name}/policy"} <= set(paths)


def test_a_maintainer_uploads_a_boot_and_lists_the_recipes_boots(api, recipe):
    catalog = [{"prefill": 64, "decode": 0, "ms": 3.0}, {"prefill": 4096, "decode": 0, "ms": 0}]
    response = api.post(
        "/api/recipes/tiny-cpu/boots/", {"catalog": catalog, "provenance": {"device": "engine log"}}, format="json"
    )
    assert response.status_code == 201
    boot = response.json()
    assert boot["recipe"] == "tiny-cpu" and boot["catalog"][1]["ms"] is None  # 0 means unmeasured, stored as null
    assert [b["id"] for b in api.get("/api/recipes/tiny-cpu/boots/").json()] == [boot["id"]]


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "catalog"),
        ({"catalog": []}, "catalog"),
        ({"catalog": [{"prefill": 64, "decode": 0, "ms": -3}]}, "catalog[0].ms"),
        ({"catalog": [{"prefill": 64, "decode": 0, "ms": 1}, {"prefill": 64, "decode": 0, "ms": 2}]}, "catalog[1]"),
        ({"catalog": [{"prefill": 64, "decode": 0, "ms": 1}], "provenance": "lab"}, "provenance"),
    ],
)
def test_an_invalid_upload_names_the_field_and_stores_nothing(api, recipe, body, field):
    from heliosweb.catalogs.models import Boot

    response = api.post("/api/recipes/tiny-cpu/boots/", body, format="json")
    assert response.status_code == 400 and response.json()["field"] == field
    assert not Boot.objects.exists()


def test_boots_of_an_unknown_recipe_answer_404(api, db):
    assert api.get("/api/recipes/ghost/boots/").status_code == 404
    assert api.post("/api/recipes/ghost/boots/", {"catalog": []}, format="json").status_code == 404


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/api"), ("get", "/api/nope"), ("post", "/api/jobs"), ("get", "/api/jobs/abc/"), ("delete", "/api/x/y/")],
)
def test_an_unknown_api_path_is_a_json_404_in_every_mode(client, settings, debug, method, path):
    """Issue 30: with DEBUG on (`./dev up`) too, never Django's HTML page or a redirect."""
    settings.DEBUG = debug
    response = getattr(client, method)(path)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json()["field"] == "path"
