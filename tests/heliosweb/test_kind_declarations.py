"""Kinds own their needs and their result types: every registered kind declares the type of its
result, a real run of each (small parameters, as stored: JSON) has exactly that type, and the web
reads what a kind declares (a recipe needed, the boots a result yields, a service's time limit)
instead of knowing kind or queue names. A sweep stored in the old shape is migrated and renders."""

from __future__ import annotations

import importlib
import json

import pytest
from django.apps import apps

from heliosweb.jobs.models import BenchmarkJob
from heliosweb.jobs.registry import get_kind, job_kinds
from scheduler_core.typed_json import type_problems

from .runs import ELSEWHERE, SMALL, finished, store

# Every registered kind that declares an example run (`Analysis.example`), bar those run elsewhere
# (vllm-check, on a real vLLM: -m vllm); a kind added to the registry is run here by declaring it.
RUN_HERE = sorted(SMALL)


def test_every_kind_declares_its_result_type_and_an_example_unless_it_runs_until_stopped():
    kinds = job_kinds()
    assert [name for name, kind in kinds.items() if kind.analysis.result is None] == []
    no_example = [name for name, kind in kinds.items() if kind.analysis.example is None]
    assert no_example == [name for name, kind in kinds.items() if kind.analysis.runs_until_stopped]
    assert set(kinds) - set(RUN_HERE) == set(no_example) | ELSEWHERE


@pytest.mark.parametrize("name", RUN_HERE)
def test_a_real_result_has_its_kinds_declared_type(name):
    _, result, _ = finished(name)
    stored = json.loads(json.dumps(result))
    assert type_problems(stored, get_kind(name).analysis.result) == []


def test_kinds_declare_what_they_need_and_yield():
    capture, engine, sweep = (get_kind(name).analysis for name in ("capture", "engine", "sweep"))
    assert capture.needs_recipe and engine.needs_recipe and not sweep.needs_recipe
    assert capture.boots is not None and engine.boots is None and sweep.boots is None
    assert engine.runs_until_stopped and not capture.runs_until_stopped and not sweep.runs_until_stopped


def test_a_service_runs_for_its_own_duration_and_an_analysis_under_the_job_limit(settings):
    engine, sweep = get_kind("engine"), get_kind("sweep")
    assert engine.time_limit_s({"duration_s": 30}) == 90 and engine.time_limit_s({"duration_s": 0}) is None
    assert sweep.time_limit_s({}) == settings.HELIOS_JOB_TIME_LIMIT_SECONDS


def test_a_capture_yields_each_of_its_boots_with_its_catalog_and_provenance():
    _, result, _ = finished("capture")
    boots = get_kind("capture").analysis.boots(result)
    assert [b["catalog"] for b in boots] == [b["catalog"] for b in result["boots"]] and len(boots) == 2
    assert [b["provenance"]["pid"] for b in boots] == [b["provenance"]["pid"] for b in result["boots"]]
    assert all(b["provenance"]["drift"]["capacities"] == [32] for b in boots)


def test_a_sweep_stored_with_its_deltas_among_the_policies_is_migrated_and_still_renders(client, viewer):
    job = store("sweep")
    new = json.loads(json.dumps(job.result))
    old = json.loads(json.dumps(new))
    for catalog, delta in old.pop("delta_ms").items():
        old["series"][catalog]["delta_ms"] = delta
    BenchmarkJob.objects.filter(pk=job.pk).update(result=old)
    migration = importlib.import_module("heliosweb.jobs.migrations.0004_i22_types_sweep_delta")
    migration._move(apps, None, True)
    job.refresh_from_db()
    assert job.result == new
    migration._move(apps, None, False)  # and back, for a rollback
    job.refresh_from_db()
    assert job.result == old
    migration._move(apps, None, True)
    client.force_login(viewer)
    figures = client.get(f"/api/jobs/{job.pk}/figures/").json()
    names = [t["name"] for t in next(f for f in figures if f["id"] == "ttft")["figure"]["data"]]
    assert "clean: rule − cost" in names and "drift: rule − cost" in names
    assert client.get(f"/jobs/{job.pk}").status_code == 200


def test_a_sweep_stored_before_it_named_its_pair_is_migrated_and_still_renders(client, viewer):
    job = store("sweep")
    new = json.loads(json.dumps(job.result))
    assert new["pair"] == {"before": "cost", "after": "rule", "label": "rule − cost"}  # its first two policies
    old = json.loads(json.dumps(new))
    del old["pair"]
    for summary in old["summary"].values():
        summary["rule_wins"], summary["rule_loses"] = summary.pop("after_wins"), summary.pop("after_loses")
    BenchmarkJob.objects.filter(pk=job.pk).update(result=old)
    migration = importlib.import_module("heliosweb.jobs.migrations.0005_sweep_pair")
    migration._rename(apps, None, True)
    job.refresh_from_db()
    assert job.result == new
    migration._rename(apps, None, False)
    job.refresh_from_db()
    assert job.result == old
    migration._rename(apps, None, True)
    job.refresh_from_db()
    client.force_login(viewer)
    assert client.get(f"/api/jobs/{job.pk}/figures/").status_code == 200
    assert client.get(f"/jobs/{job.pk}").status_code == 200
    from scheduler_core.analyses.sweep import format_text

    assert "rule wins" in format_text(job.result)  # the result text (decision evidence) names the pair's after
