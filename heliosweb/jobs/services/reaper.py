"""Failing jobs from outside: the reaper (jobs whose worker vanished; Celery beat on the `maint`
queue every 15 s, every worker start, `manage.py reap_jobs`) and a stop's drain running out.
Events and results stored before are kept."""

from __future__ import annotations

import socket
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from heliosweb.common.processes import pid_alive
from scheduler_core.errors import InvalidInput

from ..models import BenchmarkJob, JobStatus
from ..registry import get_kind
from .events import job_fail
from .pump import time_limit_exceeded

HARD_LIMIT_GRACE_S = 120  # past a job's time limit, the reaper fails it if its worker did not


def jobs_reap(*, stale_seconds: float | None = None) -> list[int]:
    """Fail running jobs past their time limit (and a grace), of a dead process on this host, or
    whose heartbeat is older than `stale_seconds` (`HELIOS_JOB_STALE_SECONDS`); the ids failed."""
    stale_seconds = settings.HELIOS_JOB_STALE_SECONDS if stale_seconds is None else stale_seconds
    host = socket.gethostname()
    now = timezone.now()
    cutoff = now - timedelta(seconds=stale_seconds)
    reaped = []
    for job in BenchmarkJob.objects.filter(status=JobStatus.RUNNING).only(
        "id", "kind", "params", "worker_host", "worker_pid", "heartbeat_at", "started_at"
    ):
        limit = _time_limit(job)
        if limit and job.started_at and job.started_at < now - timedelta(seconds=limit + HARD_LIMIT_GRACE_S):
            reason = time_limit_exceeded(limit).reason  # an analysis that never emits, in a solo pool
        elif job.worker_host == host and not pid_alive(job.worker_pid):
            reason = f"worker lost mid-job (process {job.worker_pid} on {host} is gone)"
        elif job.heartbeat_at is None or job.heartbeat_at < cutoff:
            reason = (
                f"worker lost mid-job (no heartbeat from {job.worker_host or 'its worker'} for {stale_seconds:.0f} s)"
            )
        else:
            continue
        if job_fail(job_id=job.pk, reason=reason):
            reaped.append(job.pk)
    return reaped


def _time_limit(job: BenchmarkJob) -> float | None:
    try:
        return get_kind(job.kind).time_limit_s(job.params)
    except InvalidInput:  # a kind no longer registered
        return None


def jobs_stop_after_drain(*, pids: list[int], drain_seconds: float, cause: str) -> list[int]:
    """Fail the jobs these worker processes (on this host) still run once a stop's drain ran out,
    naming the stop's `cause` (`common.processes.stop_cause`: an operator, supervisord's death, a
    full disk); each one's analysis stops at its next event."""
    reason = f"{cause} (it did not finish within the {drain_seconds:.0f} s a stop allows)"
    running = BenchmarkJob.objects.filter(
        status=JobStatus.RUNNING, worker_host=socket.gethostname(), worker_pid__in=pids
    ).values_list("pk", flat=True)
    return [job_id for job_id in running if job_fail(job_id=job_id, reason=reason)]
