"""Thin Celery adapters around the job services."""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from . import services


@shared_task(name="heliosweb.jobs.tasks.run_job", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_job(job_id: int) -> None:
    services.job_run(job_id=job_id)


@shared_task(name="heliosweb.jobs.tasks.reap_jobs", ignore_result=True)
def reap_jobs() -> list[int]:
    return services.jobs_reap()


@worker_ready.connect
def _reap_on_start(**_: object) -> None:
    """A restarted worker first fails the jobs its dead predecessor on this host left running."""
    from django.db import close_old_connections

    close_old_connections()
    services.jobs_reap()
