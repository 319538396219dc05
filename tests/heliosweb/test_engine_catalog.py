"""The simulated engine's catalog: the recipe's latest boot as stored or repaired (its flagged
shapes replaced, as any job can plan with), offered on the recipe page and recorded on the job."""

from __future__ import annotations

import pytest

from heliosweb.catalogs.services import boot_create
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.jobs.registry import RunContext
from heliosweb.simengine import engine
from heliosweb.simengine.engine import ANALYSIS, serve, setting
from heliosweb.telemetry.models import EngineToken
from scheduler_core.analyses.catalogs import execution_of
from scheduler_core.analyses.simulate import build_catalog
from scheduler_core.catalog import drift
from scheduler_core.errors import InvalidInput
from scheduler_core.profiles import load_profile

DEFAULTS = ANALYSIS.validate({})
# The engine's own clean catalog, decode and mixed graphs included (a boot carries traffic only
# with them): prefill 4096 costs 66.0 ms.
CLEAN = build_catalog({**DEFAULTS, "mixed_rows": [8, 32]}, execution_of(DEFAULTS))


@pytest.fixture
def boots(recipe):
    """Three clean boots (1.00x, 1.01x, 1.02x) and, latest, one over-measuring 4096 by 1.6x."""
    clean = [
        boot_create(recipe=recipe, catalog=CLEAN.replace_ms(lambda g, s=seed: g.ms * (1 + 0.01 * s)).to_dicts())
        for seed in range(3)
    ]
    return clean, boot_create(recipe=recipe, catalog=drift(CLEAN, 4096, 1.6).to_dicts())


def test_the_engine_plans_on_the_latest_boot_repaired_or_as_stored(recipe, boots):
    clean, bad = boots
    _, catalog, name, source = setting(ANALYSIS.validate({"catalog": "boot-repaired"}), recipe)
    assert catalog.prefill_ms[4096] == pytest.approx(66.66)  # the median of the three clean boots
    assert catalog.prefill_ms[2048] == pytest.approx(34.0)  # untouched
    assert name == f"repaired boot {bad.pk} (1 shape replaced)"
    assert source is not None and (source["boot"], source["repaired"]) == (bad.pk, True)
    [r] = source["replaced"]
    assert (r["prefill"], r["was_ms"], r["from_boots"]) == (4096, pytest.approx(105.6), [b.pk for b in clean])

    _, catalog, name, source = setting(ANALYSIS.validate({"catalog": "boot"}), recipe)
    assert catalog.prefill_ms[4096] == pytest.approx(105.6)
    assert (name, source) == (f"boot {bad.pk}", {"boot": bad.pk, "repaired": False})

    _, catalog, name, source = setting(ANALYSIS.validate({"catalog": "drift"}), recipe)
    assert (name, source) == ("drift", None)


def test_a_repaired_engine_without_a_boot_names_the_catalog(recipe):
    with pytest.raises(Exception, match="no stored boot") as caught:
        setting(ANALYSIS.validate({"catalog": "boot-repaired"}), recipe)
    assert caught.value.field == "catalog"


def test_the_engine_runs_on_a_gpu_profile_and_refuses_one_beside_a_boot(recipe):
    execution, catalog, name, _ = setting(ANALYSIS.validate({"execution": "llama-2-7b-a100"}), recipe)
    assert execution is load_profile("llama-2-7b-a100") and name == "clean"
    assert catalog.prefill_ms[2048] == pytest.approx(load_profile("llama-2-7b-a100").launch_ms(2048))
    assert catalog.graph(2048, 32) is not None and catalog.graph(0, 64) is not None  # mixed and decode
    with pytest.raises(InvalidInput) as caught:
        ANALYSIS.validate({"catalog": "boot", "execution": "llama-2-7b-h100"})
    assert caught.value.field == "execution"


def test_the_engine_job_records_the_repair_before_it_serves(recipe, boots, settings, monkeypatch):
    """The source is stored as the loop starts: here the API is unreachable, so it stops right after."""
    _, bad = boots
    monkeypatch.setattr(engine, "close_old_connections", lambda: None)  # the test's connection is its transaction
    settings.HELIOS_ENGINE_API_URL = "http://127.0.0.1:9"  # the discard port: nothing answers
    params = ANALYSIS.validate({"catalog": "boot-repaired"})
    job = BenchmarkJob.objects.create(kind="engine", queue="engine", recipe=recipe, params=params, status="running")
    with pytest.raises(OSError):
        serve(RunContext(job_id=job.pk, recipe=recipe), params, lambda event: None)
    [source] = BenchmarkJob.objects.get(pk=job.pk).catalog_sources["catalog"]
    assert (source["boot"], source["repaired"], source["replaced"][0]["prefill"]) == (bad.pk, True, 4096)
    # A first policy read that fails still revokes the engine's token (it used to fail joining
    # the poster thread it had not started, and leave the token live).
    assert not EngineToken.objects.filter(engine=f"sim-job-{job.pk}", revoked_at=None).exists()


def test_the_recipe_page_offers_the_latest_boot_repaired_and_starts_it(recipe, boots, maintainer, client, queued):
    _, bad = boots
    client.force_login(maintainer)
    page = client.get("/recipes/tiny-cpu").content.decode()
    assert f'<option value="boot">latest boot #{bad.pk} as stored (flagged 4096)</option>' in page
    assert f'<option value="boot-repaired">latest boot #{bad.pk} repaired (1 flagged shape replaced)</option>' in page
    client.post("/recipes/tiny-cpu/engine", {"action": "start", "catalog": "boot-repaired", "rate_per_s": "5"})
    job = BenchmarkJob.objects.get(kind="engine")
    assert (job.params["catalog"], job.params["rate_per_s"]) == ("boot-repaired", 5.0)


def test_the_engine_run_without_a_job_refuses_naming_the_recipe():
    """`Analysis.run` is what the CLI would call: with no job there is no recipe to serve."""
    with pytest.raises(InvalidInput) as caught:
        ANALYSIS.run(DEFAULTS, lambda event: None)
    assert caught.value.field == "recipe" and "serves a recipe" in caught.value.message
