"""Drill: a real Redis that refuses writes while a job runs: `MISCONF` (its snapshot failed: what
a full disk does) and `OOM` (at its `maxmemory`, with `noeviction`). The worker survives (it reconnects instead of exiting on its failed ack); the
running job ends `done` with every event (events go to the database first); a job submitted
meanwhile fails at once naming Redis's refusal; once Redis can write again, by itself, a new job
runs `done` on the same worker.

Redis's disk is made to fail without root or a small filesystem: its data directory is removed
under it (every snapshot then fails), and given back as a new directory. Its own snapshot retry
(every 5 s while a save is due) then succeeds and it takes writes again. Its memory: `maxmemory`
set to 1 byte, then lifted. Figures are printed (`-s`); docs/operations.md quotes them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis as redis_client
from django.contrib.auth.models import User

from heliosweb.devtool import start_redis
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.jobs.services import submission

from .conftest import Stack, _database_url, use_redis, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def figure(name: str, seconds: float) -> None:
    print(f"drill: {name}: {seconds:.1f} s")


def writable(r: redis_client.Redis) -> bool:
    try:
        r.set("helios-drill-probe", 1)
    except redis_client.ResponseError:
        return False
    return True


def status(job: BenchmarkJob) -> str:
    return str(BenchmarkJob.objects.get(pk=job.pk).status)


def disk_fails(r: redis_client.Redis, tmp_path: Path) -> None:
    lost = tmp_path / "redis-disk-gone"
    lost.mkdir()
    r.config_set("dir", str(lost))
    lost.rmdir()
    r.config_set("save", "1 1")  # a snapshot is due every second: Redis retries it by itself
    r.config_set("stop-writes-on-bgsave-error", "yes")
    r.bgsave()


def disk_back(r: redis_client.Redis, tmp_path: Path) -> None:
    back = tmp_path / "redis-disk-back"
    back.mkdir()
    r.config_set("dir", str(back))


def memory_full(r: redis_client.Redis, tmp_path: Path) -> None:
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", "1")


def memory_back(r: redis_client.Redis, tmp_path: Path) -> None:
    r.config_set("maxmemory", "0")


FAULTS = {
    "MISCONF": (disk_fails, disk_back, "it cannot save to its disk"),
    "OOM": (memory_full, memory_back, "it is at its memory limit"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_redis_refusing_writes_fails_new_jobs_with_the_reason_and_the_stack_recovers(
    tmp_path: Path, settings, fault: str
):
    from django.db import connection

    refuse, allow, why = FAULTS[fault]
    redis, url = start_redis(tmp_path / "redis")
    stack = Stack(url, _database_url(connection.settings_dict), tmp_path)
    r = redis_client.Redis.from_url(url)
    try:
        use_redis(url, settings)
        stack.start_worker()
        user = User.objects.create_user("redis-drill")
        running = submission.job_create(kind="pulse", params={"count": 40, "rate": 10.0}, user=user)
        wait_until(lambda: status(running) == JobStatus.RUNNING, what="the first job to run")

        refuse(r, tmp_path)  # Redis stops taking writes
        wait_until(lambda: not writable(r), timeout=30, what="Redis to refuse writes")

        refused = submission.job_create(kind="pulse", params={"count": 5, "rate": 50.0}, user=user)
        refused.refresh_from_db()
        assert refused.status == JobStatus.FAILED
        assert refused.error.startswith(f"could not queue the job: Redis refuses writes: {why}"), refused.error

        # The running job needs no Redis write to finish: done, with every event it emitted.
        wait_until(lambda: status(running) != JobStatus.RUNNING, timeout=60, what="the running job to end")
        running.refresh_from_db()
        assert running.status == JobStatus.DONE, running.error
        seqs = list(running.events.order_by("seq").values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1))
        assert running.events.filter(type="measurement").count() == 40

        # Its ack was refused: the worker reconnects instead of exiting.
        wait_until(
            lambda: "Connection to broker lost" in stack.worker_log() or stack.worker.poll() is not None,
            timeout=30,
            what="the worker to notice the refused ack",
        )
        assert stack.worker.poll() is None, stack.worker_log()[-3000:]

        # Room again (a writable disk; memory). After MISCONF, Redis's own retried snapshot must succeed.
        start = time.monotonic()
        allow(r, tmp_path)
        wait_until(lambda: writable(r), timeout=30, what="Redis to take writes again")
        figure(f"{fault}: Redis writes again after the room came back", time.monotonic() - start)

        start = time.monotonic()
        after = submission.job_create(kind="pulse", params={"count": 5, "rate": 50.0}, user=user)
        wait_until(lambda: status(after) not in (JobStatus.QUEUED, JobStatus.RUNNING), timeout=60, what="a new job")
        figure(f"{fault}: a job submitted once Redis writes again is done", time.monotonic() - start)
        after.refresh_from_db()
        assert after.status == JobStatus.DONE, (after.error, stack.worker_log()[-3000:])
        assert stack.worker.poll() is None
    finally:
        stack.close()
        redis.terminate()
        redis.wait(timeout=10)
