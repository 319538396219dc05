"""`./dev up` as a user runs it: the whole product from one command on its embedded defaults
(SQLite and the bundled Redis under a fresh var/), kept by supervisord. A job through it; the
front process killed (the stack runs on, the next start attaches); supervisord itself killed
mid-job (the next start stops the leftovers in order and the job finishes); Ctrl-C drains running
jobs and fails, with its reason, the one that cannot finish in time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from heliosweb.common.processes import pid_alive
from heliosweb.devtool import free_port
from heliosweb.stack import stack_processes

from .conftest import ROOT, wait_until
from .devstack import DevUp

pytestmark = [pytest.mark.e2e]

PROGRAMS = {"redis", "worker-maint", "beat", "worker-sim", "worker-sim-long", "worker-gpu", "worker-engine", "web"}


def test_dev_up_runs_a_job_survives_crashes_of_its_own_and_drains_on_ctrl_c(tmp_path: Path):
    dev = DevUp(tmp_path / "var", free_port(), HELIOS_DRAIN_SECONDS="8", HELIOS_BROKER_KEY_PREFIX="devup-test:")
    try:
        front = dev.start()
        children = dev.children()
        assert set(children) == PROGRAMS

        job = dev.api("/api/jobs/", {"kind": "pr22", "recipe": "tiny-cpu"})
        arms = dev.wait_status(job["id"], "done")["result"]["arms"]
        assert (arms[3]["cost"]["launches"], arms[3]["rule"]["ttft_ms"]) == (9, 232.1)

        # `celery inspect` finds every worker through the file ./dev up wrote (URL and key prefix),
        # as docs/operations.md shows an operator.
        broker = (dev.var / "run" / "broker.env").read_text()
        assert "HELIOS_BROKER_KEY_PREFIX=devup-test:" in broker
        shell = f"set -a; . {dev.var}/run/broker.env; set +a; exec $PY -m celery -A heliosweb inspect ping --timeout 10"
        env = {k: v for k, v in dev.env.items() if k not in ("REDIS_URL", "HELIOS_BROKER_KEY_PREFIX")}
        answers: list[str] = []

        def every_worker_answers() -> bool:  # a worker still starting (gpu imports torch) answers later
            ping = subprocess.run(
                ["bash", "-c", shell],
                cwd=ROOT,
                env={**env, "PY": sys.executable, "HELIOS_VAR_DIR": str(dev.var)},
                capture_output=True,
                text=True,
                timeout=60,
            )
            answers.append(ping.stdout + ping.stderr)
            return ping.returncode == 0 and ping.stdout.count("pong") == 5

        try:
            wait_until(every_worker_answers, timeout=120, interval=1, what="five workers to answer celery inspect")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the last answer: {answers[-1]}") from None

        # The front process killed: supervisord keeps the stack running; the next start attaches.
        front.send_signal(signal.SIGKILL)
        front.wait()
        assert dev.children() == children
        dev.start()
        assert "attaching to it" in dev.log() and dev.children() == children

        # supervisord and the front killed mid-job: the children run on. The next start stops them
        # in order (web, then the workers, which finish their jobs, Redis last) and starts anew.
        running = dev.pulse(60, 15.0)
        dev.wait_status(running, "running")
        supervisord = dev.supervisord_pid()
        for pid in (dev.proc.pid, supervisord):
            os.kill(pid, signal.SIGKILL)
        dev.proc.wait()
        wait_until(lambda: not pid_alive(supervisord), what="supervisord gone")
        assert all(pid_alive(pid) for pid in children.values())
        dev.start()
        assert (dev.var / "run" / "broker.env").read_text() == broker  # the bundled Redis kept its port
        assert not any(pid_alive(pid) for pid in children.values())
        stale = [line.split()[3] for line in dev.log().splitlines() if "stopping stale" in line]
        assert stale == ["web", *["worker"] * 6, "redis"], stale  # five workers and beat
        dev.assert_done_with_every_event(running, 60)  # drained by its orphaned worker, not killed
        assert dev.job(job["id"])["status"] == "done"  # stored data survived both crashes

        # Ctrl-C: the short job finishes; the one that outlasts the drain (8 s here) is failed, with
        # its reason, before its worker stops. Then nothing of the stack is left.
        children = dev.children()
        long_job, short_job = dev.pulse(400, 10.0), dev.pulse(40, 10.0, queue="gpu")
        dev.wait_status(long_job, "running")
        dev.wait_status(short_job, "running")
        assert dev.stop() == 0
        dev.assert_done_with_every_event(short_job, 40, stopped=True)
        stopped = dev.stored(long_job)
        assert (stopped["status"], stopped["error"]) == (
            "failed",
            "stopped by operator (it did not finish within the 8 s a stop allows)",
        )
        assert stopped["events"][-1] == {**stopped["events"][-1], "type": "failed", "reason": stopped["error"]}
        assert not any(pid_alive(pid) for pid in children.values()), dev.log()[-3000:]
        assert stack_processes(dev.var) == []
    finally:
        dev.cleanup()
