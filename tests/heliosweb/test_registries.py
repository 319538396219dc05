"""One registry each: a policy registered in scheduler_core (`policies.POLICIES`) and a job kind
registered as an analysis (`analyses.ANALYSES`) appear wherever policies or kinds are offered (the
job form, the recipe and decision forms, `GET /api/kinds/`, the OpenAPI enums, the CLI) and are run
and compared like the others, with no edit anywhere else: not in the product, not in other tests.
Each fixture adds its entry and takes it out again."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from typing import Any, TypedDict

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from heliosweb.figures.palette import policy_colour
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.jobs.registry import get_kind, job_kinds
from heliosweb.jobs.services.runner import job_run
from heliosweb.jobs.services.submission import job_create
from scheduler_core.__main__ import main as cli
from scheduler_core.analyses import ANALYSES
from scheduler_core.analyses.contract import Analysis, Emit, progress
from scheduler_core.analyses.params import IntParam, PolicyListParam
from scheduler_core.policies import POLICIES, CostPolicy, selectable_policies
from scheduler_core.typed_json import type_problems

from .runs import finished, small


class ThrowawayPolicy(CostPolicy):
    """Plans as cost does; only its name is new."""

    name = "throwaway"
    selectable = True


@pytest.fixture
def throwaway(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(POLICIES, ThrowawayPolicy.name, ThrowawayPolicy)
    return ThrowawayPolicy.name


class TallyResult(TypedDict):
    policies: list[str]
    count: int


def _tally(params: dict[str, Any], emit: Emit) -> TallyResult:
    progress(emit, params["count"], params["count"], "counted")
    return {"policies": params["policies"], "count": params["count"]}


TALLY = Analysis(
    name="tally",
    summary="A kind declared in a test: counts to `count` under each policy.",
    params=(IntParam("count", 3, "how far to count", minimum=1, maximum=10), PolicyListParam("policies")),
    run=_tally,
    format_text=lambda result: f"counted to {result['count']}",
    result=TallyResult,
    example={"count": 2},
)


@pytest.fixture
def tally(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setitem(ANALYSES, TALLY.name, TALLY)
    job_kinds.cache_clear()
    yield TALLY.name
    monkeypatch.undo()
    job_kinds.cache_clear()


def _api(user: Any) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli(list(argv)) == 0
    return out.getvalue()


def test_a_registered_policy_is_a_choice_of_the_job_form(throwaway, maintainer, client):
    client.force_login(maintainer)
    html = client.get("/jobs/new").content.decode()
    for kind in ("sweep", "boots", "simulate", "fuzz"):
        assert f'name="{kind}.policies" value="{throwaway}"' in html, kind


def test_a_registered_policy_is_a_choice_of_the_recipe_and_decision_forms(throwaway, client, django_user_model):
    olga = django_user_model.objects.create_user("olga")
    olga.user_permissions.add(*Permission.objects.filter(codename__in=["manage_recipes", "propose_decision"]))
    client.force_login(olga)
    for page in ("/recipes/new", "/decisions/new"):
        html = client.get(page).content.decode()
        assert f'<option value="{throwaway}"' in html, page


def test_a_registered_policy_is_a_choice_in_the_kinds_api_and_the_openapi_schema(throwaway, maintainer):
    api = _api(maintainer)
    kinds = {k["name"]: k for k in api.get("/api/kinds/").json()}
    policies = next(p for p in kinds["sweep"]["params"] if p["name"] == "policies")
    assert throwaway in policies["choices"]
    assert throwaway in policies["schema"]["items"]["enum"]
    assert policies["default"] == list(selectable_policies()) and throwaway in policies["default"]
    schema = api.get("/api/schema/").json()["components"]["schemas"]
    assert throwaway in schema["JobParams.sweep"]["properties"]["policies"]["items"]["enum"]


def test_a_registered_policy_is_a_choice_of_the_cli_and_has_a_colour_of_its_own(throwaway):
    out = json.loads(_cli("sweep", "--policies", f"cost,{throwaway}", "--count", "3", "--json"))
    assert set(out["series"]["clean"]) == {"cost", throwaway}
    assert policy_colour(throwaway) not in {policy_colour(p) for p in POLICIES if p != throwaway}


def test_a_sweep_plans_with_a_registered_policy(throwaway, maintainer, transactional_db):
    job = job_create(kind="sweep", params={"policies": ["cost", throwaway], "count": 4}, user=maintainer)
    job_run(job_id=job.pk)
    job = BenchmarkJob.objects.get(pk=job.pk)
    assert job.status == "done", job.error
    assert set(job.result["series"]["clean"]) == {"cost", throwaway}
    # and the sweep compares it: its first two policies, throwaway - cost (it plans as cost: no delta)
    assert job.result["pair"] == {"before": "cost", "after": throwaway, "label": f"{throwaway} − cost"}
    assert job.result["delta_ms"]["clean"] == [0.0] * len(job.result["prompt_tokens"])


def test_a_registered_kind_is_offered_by_the_form_the_api_the_schema_and_the_cli(tally, maintainer, client):
    client.force_login(maintainer)
    html = client.get("/jobs/new").content.decode()
    assert f'value="{tally}"' in html and f'name="{tally}.count"' in html
    api = _api(maintainer)
    kinds = {k["name"]: k for k in api.get("/api/kinds/").json()}
    assert [p["name"] for p in kinds[tally]["params"]] == ["count", "policies"]
    schemas = api.get("/api/schema/").json()["components"]["schemas"]
    assert schemas[f"JobCreate.{tally}"]["properties"]["kind"]["enum"] == [tally]
    assert {"$ref": f"#/components/schemas/JobCreate.{tally}"} in schemas["JobCreate"]["oneOf"]
    assert _cli(tally, "--count", "4").strip() == "counted to 4"


def test_a_registered_kind_runs_as_a_job_and_in_the_per_kind_tests_from_its_example(
    tally, throwaway, maintainer, transactional_db
):
    assert small(tally) == {"count": 2}  # the per-kind test tables read the registry's examples
    _, result, events = finished(tally)
    assert type_problems(result, get_kind(tally).analysis.result) == []
    assert result["policies"] == list(selectable_policies()) and events[-1]["type"] == "progress"
    job = job_create(kind=tally, params={"count": 5}, user=maintainer)
    assert job.queue == "sim"
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.result) == ("done", {"policies": list(selectable_policies()), "count": 5}), job.error


def test_the_fixtures_leave_the_registries_as_they_found_them():
    assert "tally" not in ANALYSES and "tally" not in job_kinds() and ThrowawayPolicy.name not in POLICIES
