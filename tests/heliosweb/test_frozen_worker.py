"""Row 21 of issue 18, in process: a worker that stopped saying it is alive is named on its
queue's waiting jobs; with a live worker on that queue their tasks are sent again, once; a job
already running on another host's live worker is not failed by a late copy of its message.
(The drill with a real SIGSTOP: test_heal_drills.py.)"""

from __future__ import annotations

import os
import socket
import time

import pytest
from django.utils import timezone

from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.jobs.services import runner, submission, workers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def registry():
    names: list[str] = []
    yield names
    for name in names:
        workers.worker_gone(name=name)


def test_a_silent_workers_queue_says_why_its_jobs_wait_and_a_live_worker_gets_them_once(maintainer, registry):
    registry += ["sim@frozen", "sim@live"]
    job = submission.job_create(kind="pulse", params={"count": 1, "rate": 10.0}, user=maintainer)
    workers.worker_alive(name="sim@frozen", queues=["sim"], at=time.time() - 30)
    sent: list[int] = []

    def resend(j: BenchmarkJob) -> None:
        sent.append(j.pk)

    assert workers.jobs_note_frozen_workers(resend=resend) == []  # no live sim worker: nothing to send to
    job.refresh_from_db()
    assert job.progress_message == f"waiting: worker sim@frozen (pid {os.getpid()}) has not answered for 30 s"

    workers.worker_alive(name="sim@live", queues=["sim"])
    assert workers.jobs_note_frozen_workers(resend=resend) == [job.pk]
    job.refresh_from_db()
    assert job.progress_message.endswith("; sent to a live worker") and job.status == JobStatus.QUEUED
    time.sleep(1.1)  # a later round: the note's seconds change, the task is not sent again
    assert workers.jobs_note_frozen_workers(resend=resend) == [] and sent == [job.pk]

    workers.worker_alive(name="sim@frozen", queues=["sim"])  # it answers again
    workers.jobs_note_frozen_workers(resend=resend)
    job.refresh_from_db()
    assert job.progress_message == ""


def test_a_late_copy_of_a_message_leaves_a_job_another_host_runs_alone(maintainer):
    job = submission.job_create(kind="pulse", params={"count": 1, "rate": 10.0}, user=maintainer)
    BenchmarkJob.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING, worker_host=f"not-{socket.gethostname()}", worker_pid=1, heartbeat_at=timezone.now()
    )
    runner.job_run(job_id=job.pk)  # the frozen worker, resumed, reads its copy
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and job.events.count() == 0
