"""Running a job (the body of the Celery task `run_job`): claim it under a row lock, run its
analysis with an `EventPump`, and finish it once. Idempotent by job id: a redelivered task never
runs a job twice."""

from __future__ import annotations

import logging
import os
import socket
from datetime import timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from heliosweb.catalogs.services import boot_create
from heliosweb.common.bounds import BadJSON, check_numbers
from heliosweb.common.processes import pid_alive
from scheduler_core.errors import InvalidInput

from ..models import BenchmarkJob, JobStatus
from ..registry import JobKind, RunContext, get_kind
from ..result_reading import reading_store
from .events import job_announce, job_end, job_fail
from .pump import EventPump, JobAbandoned, JobCancelled, time_limit_exceeded
from .storage import JobFailure, stored

log = logging.getLogger(__name__)


def job_run(*, job_id: int) -> None:
    """Run a queued job; skip a finished one; fail one whose earlier worker vanished."""
    job = stored(lambda: _claim(job_id), what="the job's start", within=settings.HELIOS_END_RETRY_SECONDS)
    if job is None:
        return
    # A connection cut between the claim and here is retried as the claim is: raised, it crashed the
    # task with the job `running`, left to the reaper's stale heartbeat (drill: connections cut).
    stored(lambda: job_announce(job.pk), what="the job's start", within=settings.HELIOS_END_RETRY_SECONDS)
    kind = get_kind(job.kind)
    pump = EventPump(job, time_limit_s=kind.time_limit_s(job.params))
    pump.start()
    context = RunContext(job_id=job.pk, recipe=job.recipe)
    try:
        try:
            result = kind.run(context, kind.analysis.from_json(job.params), pump.emit)
        finally:
            pump.stop()  # every buffered event stored before the job ends
    except JobAbandoned:
        pass  # failed from outside (stop, reaper): the job already carries its reason
    except JobCancelled:
        _end(job, JobStatus.CANCELLED, "cancelled while running")
    except JobFailure as failure:
        _end(job, JobStatus.FAILED, failure.reason)
    except SoftTimeLimitExceeded:
        _end(job, JobStatus.FAILED, time_limit_exceeded(kind.time_limit_s(job.params)).reason)
    except Exception as exc:
        log.exception("job %s failed", job_id)
        _end(job, JobStatus.FAILED, f"{type(exc).__name__}: {exc}")
    else:
        _complete(job, kind, result, pump.failure)


def _complete(job: BenchmarkJob, kind: JobKind, result: dict[str, Any], failure: JobFailure | None) -> None:
    """`done` only when every event and the result are stored; else failed with the cause."""
    if failure is None:
        failure = _non_finite(result)
    if failure is not None:
        _end(job, JobStatus.FAILED, failure.reason)
        return

    def write() -> None:
        with transaction.atomic():  # the boots and the job's result land together, or neither does
            _store_boots(job, kind, result)
            _finish(job, JobStatus.DONE, result=result, event={"type": "done"})

    try:
        stored(write, what="the result")
    except InvalidInput as exc:
        _end(job, JobStatus.FAILED, f"the {job.kind}'s catalog could not be stored: {exc}")
    except JobFailure as exc:
        _end(job, JobStatus.FAILED, exc.reason)
    else:
        _read(job, result)


def _read(job: BenchmarkJob, result: dict[str, Any]) -> None:
    """The job's reading for the decision pages, made now from the result in hand (`result_reading`).
    The job is done either way: a reading not stored here is made on its first read."""

    def make() -> None:
        job.refresh_from_db(fields=["status", "last_seq", "finished_at", "created_at"])
        if job.status == JobStatus.DONE:  # not one the reaper failed meanwhile
            reading_store(job, result)

    try:
        stored(make, what="the result's reading")
    except JobFailure:
        log.warning("job %s: its reading is left for its first reader", job.pk, exc_info=True)


def _non_finite(result: Any) -> JobFailure | None:
    """A result must be JSON a database stores: `inf` or `NaN` anywhere fails the job, named."""
    try:
        check_numbers(result, "result")
    except BadJSON as exc:
        place = exc.field if exc.field == "result" else f"result{'' if exc.field.startswith('[') else '.'}{exc.field}"
        return JobFailure(f"the result holds a non-finite number at {place}; nothing was stored")
    return None


def _end(job: BenchmarkJob, status: str, reason: str) -> None:
    """Failed or cancelled with `reason` (a last event too), retried while the database is away."""
    event = {"type": "cancelled" if status == JobStatus.CANCELLED else "failed", "reason": reason}
    try:
        # Longer than a batch's retries: a database away for a while still gets the real cause
        # (`... could not be stored: database unavailable (...)`) once it is back, where the reaper
        # would later have said only "no heartbeat".
        stored(
            lambda: _finish(job, status, error=reason, event=event),
            what="the job's end",
            within=settings.HELIOS_END_RETRY_SECONDS,
        )
    except JobFailure:
        log.error("job %s could not be marked %s (%s); the reaper will fail it", job.pk, status, reason)


def _claim(job_id: int) -> BenchmarkJob | None:
    """`queued` -> `running` (recording host, pid and a heartbeat) under a row lock; None when this
    process must not run it."""
    me_host, me_pid = socket.gethostname(), os.getpid()
    with transaction.atomic():
        job = BenchmarkJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            log.warning("job %s does not exist; dropping its task", job_id)
            return None
        if job.status == JobStatus.QUEUED:
            now = timezone.now()
            BenchmarkJob.objects.filter(pk=job_id).update(
                status=JobStatus.RUNNING, started_at=now, heartbeat_at=now, worker_host=me_host, worker_pid=me_pid,
                progress_message="",  # a note while it waited (a frozen worker) no longer holds
            )  # fmt: skip
            return BenchmarkJob.objects.select_related("recipe").get(pk=job_id)  # its recipe read here, retried

        if job.status != JobStatus.RUNNING:
            return None  # finished or cancelled: nothing to do
        if job.worker_host == me_host and (job.worker_pid == me_pid or pid_alive(job.worker_pid)):
            return None  # the same process got the message twice, or another live process runs it
        if job.worker_host != me_host and _heartbeat_fresh(job):
            return None  # another host's worker runs it (the message was sent again: a frozen worker)
    job_fail(job_id=job_id, reason=f"worker lost mid-job (process {job.worker_pid} on {job.worker_host} vanished)")
    return None


def _heartbeat_fresh(job: BenchmarkJob) -> bool:
    stale = timezone.now() - timedelta(seconds=settings.HELIOS_JOB_STALE_SECONDS)
    return job.heartbeat_at is not None and job.heartbeat_at >= stale


def _store_boots(job: BenchmarkJob, kind: JobKind, result: dict[str, Any]) -> None:
    """The boots a kind's result yields (a capture's, one per repeated boot) become boots of the
    job's recipe, as the kind hands them over."""
    recipe, boots = job.recipe, kind.analysis.boots
    if boots is not None and recipe is not None:
        for boot in boots(result):
            boot_create(recipe=recipe, catalog=boot["catalog"], provenance=boot["provenance"], job_id=job.pk)


def _finish(job: BenchmarkJob, status: str, *, event: dict[str, Any], result: Any = None, error: str = "") -> None:
    fields: dict[str, Any] = {"error": error}
    if result is not None:
        fields["result"] = result
    if status == JobStatus.DONE:
        job.refresh_from_db(fields=["progress_total"])
        fields["progress_done"] = max(job.progress_total, 1)
        fields["progress_total"] = max(job.progress_total, 1)
    # Only a job still marked running is finished here: the reaper may have failed it already.
    job_end(job_id=job.pk, status=status, event=event, from_status=(JobStatus.RUNNING,), **fields)
