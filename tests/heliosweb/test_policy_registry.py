"""One list of policies: a policy registered in scheduler_core is offered wherever policies are
chosen (the job form, `GET /api/kinds/`, an analysis's validation), with no other edit."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from heliosweb.jobs.models import BenchmarkJob
from heliosweb.jobs.services.runner import job_run
from heliosweb.jobs.services.submission import job_create
from scheduler_core.policies import POLICIES, CostPolicy


class ThrowawayPolicy(CostPolicy):
    """Plans as cost does; only its name is new."""

    name = "throwaway"
    selectable = True


@pytest.fixture
def throwaway(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(POLICIES, ThrowawayPolicy.name, ThrowawayPolicy)
    return ThrowawayPolicy.name


def test_a_registered_policy_is_a_choice_of_the_job_form(throwaway, maintainer, client):
    client.force_login(maintainer)
    html = client.get("/jobs/new").content.decode()
    for kind in ("sweep", "boots", "simulate", "fuzz"):
        assert f'name="{kind}.policies" value="{throwaway}"' in html, kind


def test_a_registered_policy_is_a_choice_in_the_kinds_api(throwaway, maintainer):
    api = APIClient()
    api.force_authenticate(maintainer)
    kinds = {k["name"]: k for k in api.get("/api/kinds/").json()}
    policies = next(p for p in kinds["sweep"]["params"] if p["name"] == "policies")
    assert throwaway in policies["choices"]
    assert throwaway in policies["schema"]["items"]["enum"]
    assert policies["default"] == ["cost", "rule", throwaway]  # sweep compares every selectable policy


def test_a_sweep_plans_with_a_registered_policy(throwaway, maintainer, transactional_db):
    job = job_create(kind="sweep", params={"policies": ["cost", throwaway], "count": 4}, user=maintainer)
    job_run(job_id=job.pk)
    job = BenchmarkJob.objects.get(pk=job.pk)
    assert job.status == "done", job.error
    assert set(job.result["series"]["clean"]) == {"cost", throwaway}
    # and the sweep compares it: its first two policies, throwaway - cost (it plans as cost: no delta)
    assert job.result["pair"] == {"before": "cost", "after": throwaway, "label": f"{throwaway} − cost"}
    assert job.result["delta_ms"]["clean"] == [0.0] * len(job.result["prompt_tokens"])
