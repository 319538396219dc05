"""Job services: validation once, nothing stored or queued on bad input, runs, cancel, reaper."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from heliosweb.catalogs.models import Boot
from heliosweb.jobs.models import BenchmarkJob, JobEvent, JobStatus
from heliosweb.jobs.registry import JobKind, job_kinds
from heliosweb.jobs.services import events, reaper, runner, submission
from scheduler_core.errors import InvalidInput

EIGHT_FIGURES = [
    ("3 / 62.10", "1 / 66.10"),
    ("3 / 62.10", "1 / 66.10"),
    ("6 / 232.10", "4 / 232.10"),
    ("9 / 238.10", "4 / 232.10"),
]


def test_it_creates_a_queued_job_and_queues_it_on_the_sim_queue(
    maintainer, recipe, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        job = submission.job_create(kind="pr22", recipe="tiny-cpu", params={"drift_factor": 2}, user=maintainer)
    assert job.status == JobStatus.QUEUED
    assert job.params["drift_factor"] == 2 and job.params["fixed_ms"] == 2.0  # defaults filled
    assert queued == [(job.pk, "sim")]


def test_a_long_sim_run_goes_to_the_long_queue_so_short_ones_keep_their_slots(
    maintainer, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        short = submission.job_create(kind="pulse", params={"count": 100, "rate": 10.0}, user=maintainer)
        long = submission.job_create(kind="pulse", params={"count": 3000, "rate": 10.0}, user=maintainer)  # 300 s
    assert queued == [(short.pk, "sim"), (long.pk, "sim_long")]
    assert (short.queue, long.queue) == ("sim", "sim_long")


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"kind": "nope"}, "kind"),
        ({"kind": 3}, "kind"),
        ({"kind": "pr22", "recipe": "missing"}, "recipe"),
        ({"kind": "pr22", "params": [1, 2]}, "params"),
        ({"kind": "pr22", "params": {"drift_factor": -1}}, "params.drift_factor"),
        ({"kind": "pr22", "params": {"drift_factor": "x"}}, "params.drift_factor"),
        ({"kind": "pr22", "params": {"bogus": 1}}, "params.bogus"),
        ({"kind": "pulse", "params": {"count": 1_000_000, "rate": 1}}, "params.count"),  # would take hours
        # gpu kinds: every rule that needs no device is checked before the job is stored or queued
        (
            {"kind": "capture", "recipe": "tiny-cpu", "params": {"capacities": [64, 128], "drift_capacities": [100]}},
            "params.drift_capacities[0]",
        ),
        ({"kind": "ttft", "params": {"prompt_tokens": [3504, 5000]}}, "params.prompt_tokens[1]"),  # tiny holds 4096
        ({"kind": "numerics", "params": {"preset": "small", "device": "cpu"}}, "params.preset"),
    ],
)
def test_it_rejects_bad_input_naming_the_field_and_stores_nothing(
    maintainer, recipe, queued, kwargs, field, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(InvalidInput) as err:
        submission.job_create(user=maintainer, **kwargs)
    assert err.value.field == field
    assert BenchmarkJob.objects.count() == 0
    assert queued == []


def test_every_scheduler_core_analysis_is_a_sim_kind():
    from scheduler_core.analyses import ANALYSES

    kinds = job_kinds()
    for name in ANALYSES:
        assert kinds[name].queue == "sim"
    assert kinds["pulse"].queue == "sim"


def test_running_pr22_stores_numbered_events_and_the_eight_figures(maintainer, transactional_db):
    job = submission.job_create(kind="pr22", user=maintainer)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE and job.progress_percent == 100
    pairs = [
        (
            f"{a['cost']['launches']} / {a['cost']['ttft_ms']:.2f}",
            f"{a['rule']['launches']} / {a['rule']['ttft_ms']:.2f}",
        )
        for a in job.result["arms"]
    ]
    assert pairs == EIGHT_FIGURES
    events = list(JobEvent.objects.filter(job=job).order_by("seq"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert job.last_seq == len(events)
    assert [e.type for e in events].count("arm_result") == 4
    assert events[-1].type == "done"


def test_a_second_delivery_of_a_finished_job_does_nothing(maintainer, transactional_db):
    job = submission.job_create(kind="pr22", user=maintainer)
    runner.job_run(job_id=job.pk)
    count = JobEvent.objects.filter(job=job).count()
    runner.job_run(job_id=job.pk)
    assert JobEvent.objects.filter(job=job).count() == count


def test_a_redelivered_job_whose_worker_died_is_failed_not_rerun(maintainer, transactional_db):
    job = submission.job_create(kind="pr22", user=maintainer)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import socket

    BenchmarkJob.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING, worker_host=socket.gethostname(), worker_pid=dead.pid
    )
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "worker lost" in job.error
    assert job.result is None


def test_the_reaper_fails_jobs_of_dead_workers_and_stale_heartbeats(maintainer, transactional_db):
    import socket
    from datetime import timedelta

    from django.utils import timezone

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    a = submission.job_create(kind="pr22", user=maintainer)
    b = submission.job_create(kind="pr22", user=maintainer)
    c = submission.job_create(kind="pr22", user=maintainer)
    now = timezone.now()
    BenchmarkJob.objects.filter(pk=a.pk).update(
        status="running", worker_host=socket.gethostname(), worker_pid=dead.pid, heartbeat_at=now
    )
    BenchmarkJob.objects.filter(pk=b.pk).update(
        status="running", worker_host="elsewhere", worker_pid=1, heartbeat_at=now - timedelta(hours=1)
    )
    BenchmarkJob.objects.filter(pk=c.pk).update(
        status="running", worker_host="elsewhere", worker_pid=1, heartbeat_at=now
    )
    assert sorted(reaper.jobs_reap(stale_seconds=60)) == [a.pk, b.pk]
    assert BenchmarkJob.objects.get(pk=c.pk).status == "running"
    assert JobEvent.objects.get(job=a, type="failed").data["reason"].startswith("worker lost")
    assert reaper.jobs_reap(stale_seconds=60) == []  # idempotent


def test_cancelling_a_queued_job_stops_it_before_it_runs(maintainer, transactional_db):
    job = submission.job_create(kind="pr22", user=maintainer)
    submission.job_cancel(job=job)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.result is None


def test_cancelling_a_finished_job_is_refused(maintainer, transactional_db):
    job = submission.job_create(kind="pr22", user=maintainer)
    runner.job_run(job_id=job.pk)
    with pytest.raises(InvalidInput) as err:
        submission.job_cancel(job=job)
    assert err.value.field == "status"


def test_a_running_job_stops_at_its_next_event_once_cancelled(maintainer, transactional_db, monkeypatch, settings):
    settings.HELIOS_EVENT_FLUSH_SECONDS = 0.01
    job = submission.job_create(kind="pulse", params={"count": 100000, "rate": 5000}, user=maintainer)
    original = job_kinds()["pulse"].analysis.run
    calls = {"n": 0}

    def run(params, emit):
        def emit_and_cancel(event):
            calls["n"] += 1
            if calls["n"] == 50:
                BenchmarkJob.objects.filter(pk=job.pk).update(cancel_requested=True)
            emit(event)

        return original(params, emit_and_cancel)

    from dataclasses import replace

    kinds = dict(job_kinds())
    kinds["pulse"] = JobKind("pulse", "sim", replace(kinds["pulse"].analysis, run=run))
    monkeypatch.setattr("heliosweb.jobs.registry.job_kinds", lambda: kinds)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert calls["n"] < 100000


def test_a_capture_result_is_stored_as_a_boot_of_the_recipe(maintainer, recipe, monkeypatch, transactional_db):
    from gpu_runner.results import capture_boots
    from scheduler_core.analyses.params import Analysis

    # Not named capture: what the web does with it follows from what it declares.
    capture = Analysis(
        name="fake_capture",
        summary="fake capture",
        params=(),
        run=lambda params, emit: {
            "catalog": [{"prefill": 512, "decode": 0, "ms": 3.5}],
            "provenance": {"device": "cpu"},
        },
        needs_recipe="a capture stores its catalog under a recipe: choose one",
        boots=capture_boots,
    )
    kinds = {**job_kinds(), "fake_capture": JobKind("fake_capture", "gpu", capture)}
    monkeypatch.setattr("heliosweb.jobs.registry.job_kinds", lambda: kinds)
    with pytest.raises(InvalidInput) as err:
        submission.job_create(kind="fake_capture", user=maintainer)
    assert err.value.field == "recipe" and err.value.message == capture.needs_recipe
    job = submission.job_create(kind="fake_capture", recipe="tiny-cpu", user=maintainer)
    assert job.queue == "gpu"
    runner.job_run(job_id=job.pk)
    boot = Boot.objects.get(job=job)
    assert boot.recipe == recipe and boot.catalog[0]["ms"] == 3.5 and boot.provenance == {"device": "cpu"}


def test_a_failing_analysis_leaves_the_job_failed_with_its_reason(maintainer, monkeypatch, transactional_db):
    from scheduler_core.analyses.params import Analysis

    def boom(params, emit):
        emit({"type": "progress", "done": 1, "total": 2, "message": "half"})
        raise RuntimeError("the model fell over")

    kinds = {**job_kinds(), "pr22": JobKind("pr22", "sim", Analysis(name="pr22", summary="", params=(), run=boom))}
    monkeypatch.setattr("heliosweb.jobs.registry.job_kinds", lambda: kinds)
    job = submission.job_create(kind="pr22", user=maintainer)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "the model fell over" in job.error
    assert list(JobEvent.objects.filter(job=job).values_list("type", flat=True)) == ["progress", "failed"]


def test_a_real_cpu_capture_stores_one_boot_per_repeated_boot(maintainer, recipe, transactional_db):
    job = submission.job_create(
        kind="capture",
        recipe="tiny-cpu",
        user=maintainer,
        params={
            "preset": "tiny",
            "device": "cpu",
            "capacities": [16, 32],
            "graphs": "prefill",
            "repeats": 1,
            "boots": 2,
        },
    )
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE, job.error
    boots = list(Boot.objects.filter(job=job).order_by("pk"))
    assert len(boots) == 2
    for boot in boots:
        assert [(g["prefill"], g["decode"]) for g in boot.catalog] == [(16, 0), (32, 0)]
        assert all(g["ms"] > 0 for g in boot.catalog) and boot.provenance["mode"] == "eager-cpu"


def test_a_capture_whose_shape_runs_out_of_memory_fails_naming_the_shape_and_stores_no_boot(
    maintainer, recipe, monkeypatch, transactional_db
):
    """Out of memory simulated in the boot process (tests/gpu_runner/oom_boot.py: no device here can
    be filled on purpose); the job fails with the shape, the memory asked for and the memory free."""
    from gpu_runner import fresh_boot

    oom_boot = Path(__file__).resolve().parents[1] / "gpu_runner" / "oom_boot.py"
    monkeypatch.setattr(fresh_boot, "BOOT_COMMAND", [sys.executable, str(oom_boot)])
    params = {"preset": "tiny", "device": "cpu", "capacities": [16, 32], "graphs": "prefill", "repeats": 1, "warmup": 0}
    job = submission.job_create(kind="capture", recipe="tiny-cpu", user=maintainer, params=params)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.result is None
    assert job.error.startswith(
        "BootOutOfMemory: out of memory in shape prefill=32 decode=0 of preset tiny on cpu: asked for 2.50 GiB, "
    )
    assert " GiB free (torch: CUDA out of memory." in job.error
    assert not Boot.objects.exists()


def test_a_capture_whose_catalog_is_invalid_fails_and_stores_no_boot(maintainer, recipe, monkeypatch, transactional_db):
    from gpu_runner.results import capture_boots
    from scheduler_core.analyses.params import Analysis

    capture = Analysis(
        name="capture",
        summary="broken capture",
        params=(),
        run=lambda params, emit: {"catalog": [{"prefill": 512, "decode": 0, "ms": -1.0}], "provenance": {}},
        boots=capture_boots,
    )
    kinds = {**job_kinds(), "capture": JobKind("capture", "gpu", capture)}
    monkeypatch.setattr("heliosweb.jobs.registry.job_kinds", lambda: kinds)
    job = submission.job_create(kind="capture", recipe="tiny-cpu", user=maintainer)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "catalog[0].ms" in job.error
    assert not Boot.objects.exists() and job.result is None


def test_a_sweep_can_name_a_stored_boot_instead_of_spelling_out_its_catalog(maintainer, recipe, transactional_db):
    from heliosweb.catalogs.services import boot_create
    from scheduler_core.execution import AffineExecution, measured_catalog

    boot = boot_create(recipe=recipe, catalog=measured_catalog(AffineExecution()).to_dicts())
    job = submission.job_create(
        kind="sweep",
        user=maintainer,
        params={"boot_catalog": {"boot": boot.pk}, "prompt_min": 3504, "prompt_max": 3504, "count": 1},
    )
    assert job.params["boot_catalog"] == boot.catalog  # the job keeps the catalog itself
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.result["series"]["boot"]["rule"]["ttft_ms"] == [
        66.1
    ]  # one 4096 launch at its 66 ms, plus 0.10 ms first token


@pytest.mark.parametrize(
    "value, field",
    [
        ({"boots": [999]}, "params.boot_catalogs.boots"),
        ({"boots": "1"}, "params.boot_catalogs.boots"),
        ({"boots": [True]}, "params.boot_catalogs.boots"),
    ],
)
def test_naming_an_unknown_or_malformed_boot_is_refused_and_nothing_is_queued(maintainer, recipe, queued, value, field):
    with pytest.raises(InvalidInput) as err:
        submission.job_create(kind="boots", user=maintainer, params={"boot_catalogs": value})
    assert err.value.field == field
    assert err.value.param == "boot_catalogs"  # what a form shows the error under
    assert not BenchmarkJob.objects.exists() and queued == []


def test_a_boot_named_under_a_parameters_old_name_is_the_boot_under_its_name_now(maintainer, recipe, queued):
    from heliosweb.catalogs.services import boot_create
    from scheduler_core.execution import AffineExecution, measured_catalog

    boot = boot_create(recipe=recipe, catalog=measured_catalog(AffineExecution()).to_dicts())
    job = submission.job_create(
        kind="ttft", recipe=recipe.name, user=maintainer, params={"catalog": {"boot": boot.pk}, "device": "cpu"}
    )
    assert job.params["boot_catalog"] == boot.catalog and "catalog" not in job.params
    with pytest.raises(InvalidInput) as err:
        submission.job_create(kind="ttft", user=maintainer, params={"catalog": {"boot": 999}})
    assert (err.value.field, err.value.param) == ("params.boot_catalog.boot", "boot_catalog")


def test_done_is_sent_only_after_the_result_is_committed(maintainer, monkeypatch, transactional_db):
    """A listener told `done` reads the job at once: it must find the job done, not still running."""
    from django.db import connection

    sent_inside_a_transaction = []
    real_send = events.events_send

    def send(job_id, messages):
        sent_inside_a_transaction.extend((m["type"], connection.in_atomic_block) for m in messages)
        real_send(job_id, messages)

    monkeypatch.setattr(events, "events_send", send)
    job = submission.job_create(kind="pr22", user=maintainer)
    runner.job_run(job_id=job.pk)
    assert ("done", False) in sent_inside_a_transaction
    assert ("done", True) not in sent_inside_a_transaction


def test_a_kind_that_serves_gets_its_job_and_recipe_as_a_run_context(maintainer, recipe, monkeypatch, transactional_db):
    """The runner hands `JobKind.serve` the job's id and recipe; the analysis's own `run` (what the
    CLI calls, with no job) is not used then."""
    from scheduler_core.analyses.params import Analysis

    seen = []

    def serve(context, params, emit):
        seen.append(context)
        return {"served": context.recipe.name}

    def run(params, emit):
        raise AssertionError("a serving kind is run through serve")

    analysis = Analysis(name="pr22", summary="", params=(), run=run)
    kinds = {**job_kinds(), "pr22": JobKind("pr22", "sim", analysis, serve=serve)}
    monkeypatch.setattr("heliosweb.jobs.registry.job_kinds", lambda: kinds)
    job = submission.job_create(kind="pr22", recipe=recipe.name, user=maintainer)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE and job.result == {"served": recipe.name}
    assert [(c.job_id, c.recipe.pk) for c in seen] == [(job.pk, recipe.pk)]
