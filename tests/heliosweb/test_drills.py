"""Fault drills on a real `./dev up` stack: kill -9 each child in turn while jobs run.

One stack start for all of them (each drill leaves the stack as it found it: running, healed):
the killed child is restarted; a job running elsewhere finishes `done` with every event; the
killed worker's own job fails with the reason; a new job on the restarted part runs. The `sim`
worker has one slot here, and the reaper must still run while that slot is busy.

Figures (restart times) are printed; run with `-s` to see them (docs/operations.md quotes them).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from heliosweb import stack
from heliosweb.devtool import free_port

from .conftest import ROOT, wait_until
from .devstack import DevUp

pytestmark = [pytest.mark.e2e]


def figure(name: str, seconds: float) -> None:
    print(f"drill: {name}: {seconds:.1f} s")


def stale_job(dev: DevUp) -> int:
    """A job marked running by a process that no longer exists on this host: the reaper's work."""
    code = (
        "import socket; from django.utils import timezone; from heliosweb.jobs.models import BenchmarkJob;"
        "j = BenchmarkJob.objects.create(kind='pulse', queue='sim', status='running', params={},"
        f" worker_host=socket.gethostname(), worker_pid={dead_pid()}, started_at=timezone.now(),"
        " heartbeat_at=timezone.now()); print(j.pk)"
    )
    return int(dev.manage("shell", "-c", code).strip().splitlines()[-1])


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def second_host_worker(dev: DevUp, queues: str) -> subprocess.Popen:
    """`./dev worker --queues QUEUES` as a second host runs it (docs/web.md, "Other hosts"): the
    stack's REDIS_URL and database, its own process group (this test kills it)."""
    env = dict(dev.env, REDIS_URL=dev.redis_url(), **{stack.STACK_ENV: str(dev.var)})
    log = (dev.var.parent / "second-host.log").open("a")
    cmd = [sys.executable, "-m", "heliosweb.devtool", "worker", "--queues", queues]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def test_every_child_killed_in_turn_heals_and_loses_nothing(tmp_path: Path):
    dev = DevUp(tmp_path / "var", free_port(), HELIOS_SIM_CONCURRENCY="1", HELIOS_REAP_SECONDS="2")
    try:
        dev.start()

        # The reaper runs while the only sim slot is busy (it has its own queue and worker).
        busy = dev.pulse(300, 15.0)
        dev.wait_status(busy, "running")
        ghost = stale_job(dev)
        reaped = dev.wait_status(ghost, "failed", timeout=60)
        assert "worker lost mid-job" in reaped["error"] and dev.job(busy)["status"] == "running"

        # web, then the maintenance worker (its reaper works again after), while the sim job runs.
        start = time.monotonic()
        dev.kill("web")
        wait_until(dev.serving, timeout=120, what="the web server to serve again")
        figure("web back serving after kill -9", time.monotonic() - start)
        figure("worker-maint restarted after kill -9", dev.kill("worker-maint"))
        assert "worker lost mid-job" in dev.wait_status(stale_job(dev), "failed", timeout=90)["error"]
        dev.assert_done_with_every_event(busy, 300)

        # each job worker, killed mid-job while the other one runs a job
        for victim, other in (("worker-gpu", "sim"), ("worker-sim", "gpu")):
            mine = dev.pulse(600, 20.0, queue=victim.removeprefix("worker-"))
            theirs = dev.pulse(150, 15.0, queue=other)
            dev.wait_status(mine, "running")
            dev.wait_status(theirs, "running")
            start = time.monotonic()
            dev.kill(victim)
            lost = dev.wait_status(mine, "failed")
            figure(f"{victim}'s job failed after kill -9", time.monotonic() - start)
            assert lost["error"].startswith("worker lost mid-job") and socket.gethostname() in lost["error"]
            dev.assert_done_with_every_event(theirs, 150)
            dev.assert_done_with_every_event(dev.pulse(20, 50.0, queue=victim.removeprefix("worker-")), 20)

        # A second host's worker (`./dev worker`, on this stack's Redis and database), killed mid-job:
        # its job fails naming its process; the stack's own worker, named apart, runs its job whole.
        second = second_host_worker(dev, "gpu")
        wait_until(
            lambda: "ready." in (tmp_path / "second-host.log").read_text(), timeout=120, what="the second worker"
        )
        jobs = dev.pulses(450, 15.0, "gpu", 2)  # 30 s, one each: a solo worker takes one at a time
        for job in jobs:
            dev.wait_status(job, "running")
        start = time.monotonic()
        second.kill()
        second.wait(timeout=30)
        lost = wait_until(lambda: next((j for j in map(dev.job, jobs) if j["status"] == "failed"), None), timeout=120,
                          interval=0.2, what="the second host's job to fail")  # fmt: skip
        figure("the second host's job failed after kill -9", time.monotonic() - start)
        assert lost["error"].startswith(f"worker lost mid-job (process {second.pid} on"), lost["error"]
        dev.assert_done_with_every_event(next(j for j in jobs if j != lost["id"]), 450)
        assert f"gpu.{second.pid}@" in (tmp_path / "second-host.log").read_text()  # not the stack's gpu@host

        # Redis, mid-job: the events live in the database; the job ends done with every one of them.
        # The workers holding a job (prefork and solo pools) ride the outage out: the same processes
        # take the next jobs (Celery 5.7 exited them, "Unrecoverable error", server/broker_transport.py).
        on_gpu, running = dev.pulse(450, 15.0, queue="gpu"), dev.pulse(450, 15.0)  # 30 s: still running when killed
        dev.wait_status(running, "running")
        dev.wait_status(on_gpu, "running")
        before = dev.children()
        figure("redis restarted after kill -9", dev.kill("redis"))
        dev.assert_done_with_every_event(running, 450)
        dev.assert_done_with_every_event(on_gpu, 450)
        start = time.monotonic()
        dev.assert_done_with_every_event(dev.pulse(20, 50.0), 20)
        figure("a new job done after the Redis restart", time.monotonic() - start)
        dev.assert_done_with_every_event(dev.pulse(20, 50.0, queue="gpu"), 20)
        after = dev.children()
        for worker in ("worker-sim", "worker-gpu", "worker-engine", "worker-maint"):
            assert after[worker] == before[worker], f"{worker} restarted across the Redis outage:\n{dev.log()[-3000:]}"
        assert dev.stop() == 0
    finally:
        dev.cleanup()
