"""Thin Celery adapters around the job services (`services.submission` queues `run_job` by name)."""

from __future__ import annotations

import os
import threading

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings

from heliosweb.common.processes import child_pids

from .services.reaper import jobs_reap, jobs_stop_by_operator
from .services.runner import job_run
from .services.submission import RUN_JOB_TASK


@shared_task(name=RUN_JOB_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_job(job_id: int) -> None:
    job_run(job_id=job_id)


@shared_task(name="heliosweb.jobs.tasks.reap_jobs", ignore_result=True)
def reap_jobs() -> list[int]:
    return jobs_reap()


@worker_ready.connect
def _reap_on_start(**_: object) -> None:
    """A restarted worker first fails the jobs its dead predecessor on this host left running."""
    from django.db import close_old_connections

    close_old_connections()
    jobs_reap()


@worker_shutting_down.connect
def _drain(**_: object) -> None:
    """A stop (warm shutdown) lets running jobs finish for HELIOS_DRAIN_SECONDS; the jobs still
    running then fail "stopped by operator" instead of being killed without a word."""
    drain = settings.HELIOS_DRAIN_SECONDS

    def stop_the_rest() -> None:
        me = os.getpid()
        jobs_stop_by_operator(pids=[me, *child_pids(me)], drain_seconds=drain)

    timer = threading.Timer(drain, stop_the_rest)
    timer.daemon = True
    timer.start()
