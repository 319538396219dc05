"""Thin Celery adapters around the job services (`services.submission` queues `run_job` by name)."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

import redis
from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings

from heliosweb.common.processes import child_pids, stop_cause

from .services.reaper import jobs_reap, jobs_stop_after_drain
from .services.runner import job_run
from .services.submission import RUN_JOB_TASK, job_enqueue
from .services.workers import jobs_note_frozen_workers, start_heartbeat, worker_gone


@shared_task(name=RUN_JOB_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_job(job_id: int) -> None:
    job_run(job_id=job_id)


@shared_task(name="heliosweb.jobs.tasks.reap_jobs", ignore_result=True)
def reap_jobs() -> list[int]:
    reaped = jobs_reap()
    jobs_note_frozen_workers(resend=job_enqueue)
    return reaped


_heartbeat: dict[str, Any] = {}  # this worker process's: its name and the event that stops it


@worker_ready.connect
def _reap_on_start(sender: Any, **_: object) -> None:
    """A restarted worker first fails the jobs its dead predecessor on this host left running,
    then says it is alive every few seconds (a frozen one falls silent: `services.workers`)."""
    from django.db import close_old_connections

    close_old_connections()
    jobs_reap()
    queues = sorted(sender.app.amqp.queues.consume_from or sender.app.amqp.queues)
    _heartbeat.update(name=sender.hostname, stop=start_heartbeat(name=sender.hostname, queues=queues))
    _heartbeat["supervisor"] = os.getppid()  # supervisord under `./dev up`: its death is a stop's cause


@worker_shutting_down.connect
def _drain(**_: object) -> None:
    """A stop (warm shutdown) lets running jobs finish for HELIOS_DRAIN_SECONDS; the jobs still
    running then fail naming the stop's cause, as seen now (an operator, supervisord's death, a full
    disk) instead of being killed without a word."""
    cause = stop_cause(supervisor_pid=_heartbeat.get("supervisor", os.getppid()), var=settings.VAR_DIR)
    if _heartbeat:
        _heartbeat["stop"].set()
        with contextlib.suppress(redis.RedisError):
            worker_gone(name=_heartbeat["name"])
    drain = settings.HELIOS_DRAIN_SECONDS

    def stop_the_rest() -> None:
        me = os.getpid()
        jobs_stop_after_drain(pids=[me, *child_pids(me)], drain_seconds=drain, cause=cause)

    timer = threading.Timer(drain, stop_the_rest)
    timer.daemon = True
    timer.start()
