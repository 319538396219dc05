"""`./dev up` as a user runs it: the whole product from one command on its embedded defaults
(SQLite and the bundled Redis under a fresh var/), a job through it, Ctrl-C stopping every child,
and a start after a crash (supervisor killed, children left behind) coming up again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from heliosweb.common.processes import pid_alive
from heliosweb.devtool import free_port, signal_group

from .conftest import ROOT, wait_until

pytestmark = [pytest.mark.e2e]


class DevUp:
    def __init__(self, var: Path, port: int) -> None:
        self.var, self.port = var, port
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")
        }
        self.env.update(HELIOS_VAR_DIR=str(var), HELIOS_DEMO_PASSWORD="pw-dev-up-123", PYTHONUNBUFFERED="1")
        self.proc: subprocess.Popen | None = None

    def start(self) -> subprocess.Popen:
        before = self.children().get("web")  # an orphaned web server may still answer: wait for ours
        log = (self.var.parent / "dev-up.log").open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "heliosweb.devtool", "up", "--port", str(self.port)],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_until(
            lambda: self.children().get("web") not in (None, before) and self._serving(),
            timeout=180,
            interval=0.3,
            what="./dev up to serve the login page",
        )
        return self.proc

    def _serving(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log()[-3000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/accounts/login/", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def children(self) -> dict[str, int]:
        return {p.stem: int(p.read_text()) for p in (self.var / "run").glob("*.pid")}

    def manage(self, *args: str) -> str:
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=True, capture_output=True, text=True
        ).stdout

    def api(self, token: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            method="POST" if body else "GET",
            data=json.dumps(body).encode() if body else None,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def log(self) -> str:
        path = self.var.parent / "dev-up.log"
        return path.read_text() if path.exists() else ""


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line names `text`: a worker's pool processes too, not only the pids on file."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and pid_alive(int(proc.name)):
            try:
                if text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def test_dev_up_runs_a_job_stops_cleanly_and_restarts_after_a_crash(tmp_path: Path):
    dev = DevUp(tmp_path / "var", free_port())
    try:
        supervisor = dev.start()
        children = dev.children()
        assert set(children) == {"redis", "worker-sim", "worker-gpu", "worker-engine", "web"}

        token = dev.manage("create_api_token", "maintainer").strip().splitlines()[-1]
        job = dev.api(token, "/api/jobs/", {"kind": "pr22", "recipe": "tiny-cpu"})
        wait_until(lambda: dev.api(token, f"/api/jobs/{job['id']}/")["status"] == "done", timeout=60, what="the job")
        arms = dev.api(token, f"/api/jobs/{job['id']}/")["result"]["arms"]
        assert (arms[3]["cost"]["launches"], arms[3]["rule"]["ttft_ms"]) == (9, 232.1)

        supervisor.send_signal(signal.SIGINT)  # Ctrl-C
        assert supervisor.wait(timeout=60) == 0
        assert not any(pid_alive(pid) for pid in children.values()), dev.log()[-3000:]
        assert processes_mentioning(str(dev.var)) == []  # the sim worker's pool process went too
        assert dev.children() == {}

        # A crash: the supervisor dies, its children run on. The next start stops them and comes up.
        supervisor = dev.start()
        orphans = dev.children()
        supervisor.send_signal(signal.SIGKILL)
        supervisor.wait()
        assert all(pid_alive(pid) for pid in orphans.values())
        supervisor = dev.start()
        assert not any(pid_alive(pid) for pid in orphans.values())
        assert "stopping stale" in dev.log()
        # Stored data survived the crash: the job is still there.
        assert dev.api(token, f"/api/jobs/{job['id']}/")["status"] == "done"
        supervisor.send_signal(signal.SIGINT)
        assert supervisor.wait(timeout=60) == 0
        assert processes_mentioning(str(dev.var)) == []
    finally:
        if dev.proc is not None and dev.proc.poll() is None:
            dev.proc.send_signal(signal.SIGINT)
            dev.proc.wait(timeout=60)
        for pid in dev.children().values():
            if pid_alive(pid):
                signal_group(pid, signal.SIGKILL)
