"""Thin Celery adapters around the job services (`services.submission` queues `run_job` by name)."""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from .services.reaper import jobs_reap
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
