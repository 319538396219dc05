"""No silent loss: a job whose events or result cannot be stored, or whose result cannot be, never
ends `done`. The database is made to fail by fault injection (its error, as SQLite raises it on a
full disk, from the real write path); the job runs in this process on the real test database."""

from __future__ import annotations

import math
import re

import pytest
from django.db import OperationalError

from heliosweb.jobs.models import BenchmarkJob, JobEvent, JobStatus
from heliosweb.jobs.registry import JobKind, job_kinds
from heliosweb.jobs.services import reaper, runner, submission
from scheduler_core.analyses.params import Analysis

DISK_FULL = "database or disk is full"


def flaky_event_writes(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[int]:
    """The next `failures` event batch writes fail as on a full disk; later ones go through."""
    calls: list[int] = []
    original = JobEvent.objects.bulk_create

    def bulk_create(objs, *args, **kwargs):
        calls.append(len(calls))
        if len(calls) <= failures:
            raise OperationalError(DISK_FULL)
        return original(objs, *args, **kwargs)

    monkeypatch.setattr(JobEvent.objects, "bulk_create", bulk_create)
    return calls


def pulse(maintainer, count: int = 60) -> BenchmarkJob:
    return submission.job_create(kind="pulse", params={"count": count, "rate": 2000.0}, user=maintainer)


def with_kind(monkeypatch: pytest.MonkeyPatch, run) -> None:
    analysis = Analysis(name="pr22", summary="", params=(), run=run)
    kinds = {**job_kinds(), "pr22": JobKind("pr22", "sim", analysis)}
    monkeypatch.setattr("heliosweb.jobs.registry.job_kinds", lambda: kinds)


def test_event_writes_that_fail_a_few_times_are_retried_and_nothing_is_lost(
    maintainer, monkeypatch, transactional_db, settings
):
    settings.HELIOS_STORE_RETRY_SECONDS = 30  # a deadline, never reached: the fourth write succeeds
    calls = flaky_event_writes(monkeypatch, failures=3)
    job = pulse(maintainer)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE, job.error
    assert len(calls) > 3
    seqs = list(job.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, job.last_seq + 1))
    measured = [e.data["i"] for e in job.events.filter(type="measurement").order_by("seq")]
    assert measured == list(range(60))


def test_event_writes_that_keep_failing_fail_the_job_at_once_with_the_cause(
    maintainer, monkeypatch, transactional_db, settings
):
    settings.HELIOS_STORE_RETRY_SECONDS = 0.3
    flaky_event_writes(monkeypatch, failures=10**9)
    job = pulse(maintainer, count=2000)  # about a second of events: the failure stops it mid-run
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert re.fullmatch(r"\d+ events of the job could not be stored: disk full \(database or disk is full\)", job.error)
    assert job.events.last().type == "failed" and job.result is None


def test_a_failure_of_the_last_batch_still_keeps_the_job_from_done(maintainer, monkeypatch, transactional_db, settings):
    """The analysis returns before the pump tries its last batch: the job fails, never `done`."""
    settings.HELIOS_STORE_RETRY_SECONDS = 0.2
    settings.HELIOS_EVENT_FLUSH_SECONDS = 60  # nothing is flushed until the end
    flaky_event_writes(monkeypatch, failures=10**9)
    with_kind(monkeypatch, lambda params, emit: (emit({"type": "log", "message": "one"}), {"ok": 1})[1])
    job = submission.job_create(kind="pr22", user=maintainer)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.result) == (JobStatus.FAILED, None)
    assert "disk full" in job.error


def test_a_result_with_a_non_finite_number_fails_the_job_naming_the_field(maintainer, monkeypatch, transactional_db):
    with_kind(monkeypatch, lambda params, emit: {"arms": [{"cost": {"ms": 1e308 * 10}}], "n": 1})
    job = submission.job_create(kind="pr22", user=maintainer)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.result is None
    assert job.error == "the result holds a non-finite number at result.arms[0].cost.ms; nothing was stored"


def test_an_event_with_a_non_finite_number_fails_the_job_at_that_event(maintainer, monkeypatch, transactional_db):
    def run(params, emit):
        emit({"type": "measurement", "name": "x", "i": 0, "ms": math.nan})
        raise AssertionError("not reached: the event stops the analysis")

    with_kind(monkeypatch, run)
    job = submission.job_create(kind="pr22", user=maintainer)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.error) == (
        JobStatus.FAILED,
        "a measurement event holds a non-finite number at event.ms",
    )


def test_a_job_past_its_time_limit_fails_with_time_limit_exceeded(maintainer, transactional_db, settings):
    settings.HELIOS_JOB_TIME_LIMIT_SECONDS = 0.5
    job = submission.job_create(kind="pulse", params={"count": 100, "rate": 20.0}, user=maintainer)  # 5 s
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.error) == (JobStatus.FAILED, "time limit exceeded (0.5 s)")
    assert job.events.count() < 100


def test_the_reaper_fails_a_job_far_past_its_time_limit(maintainer, transactional_db, settings):
    """The backstop for an analysis that never emits in a solo pool (no Celery time limit there)."""
    import os
    import socket
    from datetime import timedelta

    from django.utils import timezone

    settings.HELIOS_JOB_TIME_LIMIT_SECONDS = 60
    started = timezone.now() - timedelta(seconds=60 + reaper.HARD_LIMIT_GRACE_S + 1)
    job = BenchmarkJob.objects.create(
        kind="pulse",
        queue="sim",
        params={"count": 1, "rate": 1.0},
        status=JobStatus.RUNNING,
        started_at=started,
        heartbeat_at=timezone.now(),
        worker_host=socket.gethostname(),
        worker_pid=os.getpid(),  # alive
    )
    assert reaper.jobs_reap() == [job.pk]
    job.refresh_from_db()
    assert job.error == "time limit exceeded (60 s)"


def test_stored_batches_are_also_sent_live_every_event_once(maintainer, monkeypatch, transactional_db):
    """The retrying store must not swallow the live send: each stored event goes out once, in order."""
    from heliosweb.jobs.services import pump

    sent: list[int] = []
    monkeypatch.setattr(pump, "events_send", lambda job_id, messages: sent.extend(m["seq"] for m in messages))
    job = pulse(maintainer, count=40)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE
    assert sent == list(range(1, job.last_seq))  # all but the last, `done`, which event_append sends


@pytest.mark.parametrize(
    "reply, why",
    [
        ("OOM command not allowed when used memory > 'maxmemory'.", "it is at its memory limit"),
        (
            "MISCONF Redis is configured to save RDB snapshots, but it is currently not able",
            "it cannot save to its disk",
        ),
        ("READONLY You can't write against a read only replica.", "it is a read-only replica"),
    ],
)
@pytest.mark.parametrize("in_pipeline", [False, True])
def test_a_job_redis_refuses_to_queue_fails_at_once_naming_the_refusal(
    maintainer, monkeypatch, transactional_db, reply, why, in_pipeline
):
    """Redis's reply as redis-py raises it (its parser; a pipeline prefixes the command), re-raised
    by kombu as its own OperationalError: the refusal is found under it."""
    from kombu.exceptions import OperationalError as KombuOperationalError
    from redis._parsers.base import BaseParser
    from redis.exceptions import ResponseError

    from heliosweb.celery import app
    from heliosweb.common.redis_errors import redis_refusal

    def refuse(*args, **kwargs):
        error = BaseParser.parse_error(reply)
        if in_pipeline:
            error.args = (f"Command # 1 (LPUSH sim x) of pipeline caused error: {error.args[0]}",)
        try:
            raise error
        except ResponseError as exc:
            raise KombuOperationalError(str(exc)) from exc

    monkeypatch.setattr(app, "send_task", refuse)
    job = pulse(maintainer)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error.startswith(f"could not queue the job: Redis refuses writes: {why}")
    assert redis_refusal(ResponseError("WRONGTYPE Operation against a key")) is None


def flaky_terminal_events(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[int]:
    """The next `failures` single-event writes (a job's terminal event) fail as on a full disk."""
    calls: list[int] = []
    original = JobEvent.objects.create

    def create(**kwargs):
        calls.append(len(calls))
        if len(calls) <= failures:
            raise OperationalError(DISK_FULL)
        return original(**kwargs)

    monkeypatch.setattr(JobEvent.objects, "create", create)
    return calls


def test_a_job_whose_done_event_fails_to_store_at_first_still_ends_with_it(
    maintainer, monkeypatch, transactional_db, settings
):
    """Status and terminal event are one write: the first attempts roll the status back with the
    event, so the retry that succeeds writes both (written apart, the job was `done` without `done`)."""
    settings.HELIOS_STORE_RETRY_SECONDS = 30
    calls = flaky_terminal_events(monkeypatch, failures=2)
    job = pulse(maintainer, count=10)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert len(calls) == 3
    assert job.status == JobStatus.DONE, job.error
    assert job.events.last().type == "done" and job.events.last().seq == job.last_seq


def test_a_failure_whose_event_cannot_be_stored_leaves_the_job_as_it_was(maintainer, monkeypatch, transactional_db):
    """The reaper's failure while the disk is full: neither status nor event is written; the next
    round, with room again, writes both."""
    import socket

    from django.utils import timezone

    job = BenchmarkJob.objects.create(
        kind="pulse", queue="sim", params={}, status=JobStatus.RUNNING, started_at=timezone.now(),
        heartbeat_at=timezone.now(), worker_host=socket.gethostname(), worker_pid=dead_pid(),
    )  # fmt: skip
    flaky_terminal_events(monkeypatch, failures=1)
    with pytest.raises(OperationalError):
        reaper.jobs_reap()
    job.refresh_from_db()
    assert (job.status, job.events.count()) == (JobStatus.RUNNING, 0)
    assert reaper.jobs_reap() == [job.pk]
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert [(e.type, e.data["reason"]) for e in job.events.all()] == [("failed", job.error)]


def dead_pid() -> int:
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_failed_progress_announcement_never_stops_the_event_pump(maintainer, monkeypatch, transactional_db):
    """The database cut while the pump announced progress (its read is outside the retried write):
    the pump's thread died there, the events buffered after were never stored and the job ended
    `done` without them (drill: the database away mid-job)."""
    from heliosweb.jobs.services import pump

    calls: list[int] = []

    def announce(job_id: int) -> None:
        calls.append(job_id)
        if len(calls) == 1:
            raise OperationalError("consuming input failed: server closed the connection unexpectedly")

    monkeypatch.setattr(pump, "job_announce", announce)
    monkeypatch.setattr(pump, "ANNOUNCE_EVERY_S", 0.0)
    job = submission.job_create(kind="pulse", params={"count": 300, "rate": 1000.0}, user=maintainer)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE, job.error
    assert len(calls) > 1
    assert list(job.events.order_by("seq").values_list("seq", flat=True)) == list(range(1, job.last_seq + 1))
    assert job.events.filter(type="measurement").count() == 300


def test_a_connection_cut_as_the_job_is_announced_is_retried_and_the_job_runs(
    maintainer, monkeypatch, transactional_db
):
    """The start's announcement (a read, after the claim) met a connection the proxy had cut: the
    task raised and the job stayed `running` until the reaper failed it for a stale heartbeat
    (drill: every connection cut under traffic). It is retried like the claim."""
    calls: list[int] = []
    real = runner.job_announce

    def announce(job_id: int) -> None:
        calls.append(job_id)
        if len(calls) == 1:
            raise OperationalError("consuming input failed: server closed the connection unexpectedly")
        real(job_id)

    monkeypatch.setattr(runner, "job_announce", announce)
    job = pulse(maintainer, count=20)
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE, job.error
    assert len(calls) == 2 and job.events.filter(type="measurement").count() == 20
