"""`./dev up` driven from a test as a user runs it: a fresh var/, the API with a token, the stack's
processes as supervisord reports them. Used by the lifecycle test and the fault drills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from heliosweb import stack
from heliosweb.common.processes import pid_alive

from .conftest import ROOT, wait_until


class DevUp:
    def __init__(self, var: Path, port: int, **env: str) -> None:
        self.var, self.port = var, port
        self.paths = stack.Paths(var)
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")
        }
        self.env.update(HELIOS_VAR_DIR=str(var), HELIOS_DEMO_PASSWORD="pw-dev-up-123", PYTHONUNBUFFERED="1", **env)
        self.proc: subprocess.Popen | None = None
        self.token = ""

    # --- the front process --------------------------------------------------------------------

    def start(self) -> subprocess.Popen:
        """Run `./dev up` and wait until it announces the web server (a start after a crash first
        stops or attaches to what the previous one left)."""
        mark = len(self.log())
        log = (self.var.parent / "dev-up.log").open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "heliosweb.devtool", "up", "--port", str(self.port)],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def announced() -> bool:
            assert self.proc is not None and self.proc.poll() is None, self.log()[-4000:]
            return "dev: Helios Observatory on" in self.log()[mark:] and self.serving()

        wait_until(announced, timeout=240, interval=0.3, what="./dev up to serve the login page")
        return self.proc

    def stop(self, timeout: float = 180) -> int:
        """Ctrl-C, and wait for the front to return."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=timeout)

    def log(self) -> str:
        path = self.var.parent / "dev-up.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def cleanup(self) -> None:
        """Whatever happened in the test: stop the front, then anything of this stack left running."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        pid = stack.live_supervisord(self.paths)
        if pid:
            os.kill(pid, signal.SIGTERM)
            wait_until(lambda: not pid_alive(pid), timeout=120, what="supervisord to stop")
        stack.stop_leftovers(self.var, lambda message: None)

    # --- the stack's processes -------------------------------------------------------------------

    def children(self) -> dict[str, int]:
        return stack.running_pids(self.paths)

    def supervisord_pid(self) -> int | None:
        return stack.live_supervisord(self.paths)

    def kill(self, name: str) -> float:
        """kill -9 one program; wait until supervisord runs it again. Returns seconds until it did."""
        old = self.children()[name]
        os.kill(old, signal.SIGKILL)
        killed = time.monotonic()
        wait_until(lambda: self.children().get(name, old) != old, timeout=120, interval=0.1, what=f"{name} restarted")
        return time.monotonic() - killed

    def serving(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/accounts/login/", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    # --- the product, as a script uses it --------------------------------------------------------

    def manage(self, *args: str) -> str:
        env = dict(self.env, REDIS_URL=self.redis_url())
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True
        ).stdout

    def redis_url(self) -> str:
        return json.loads((self.var / "run" / "stack.json").read_text())["redis_url"]

    def login_token(self) -> str:
        if not self.token:
            self.token = self.manage("create_api_token", "maintainer", "--rotate").strip().splitlines()[-1]
        return self.token

    def api(self, path: str, body: dict | None = None) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            method="POST" if body else "GET",
            data=json.dumps(body).encode() if body else None,
            headers={"Authorization": f"Bearer {self.login_token()}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def job(self, job_id: int) -> dict:
        return self.api(f"/api/jobs/{job_id}/")

    def stored(self, job_id: int) -> dict:
        """The job and its events as the database holds them (works with the stack stopped)."""
        code = (
            "import json; from heliosweb.jobs.models import BenchmarkJob;"
            f"j = BenchmarkJob.objects.get(pk={job_id});"
            "print(json.dumps({'status': j.status, 'error': j.error, 'last_seq': j.last_seq,"
            " 'events': [dict(e.data, seq=e.seq, type=e.type) for e in j.events.order_by('seq')]}))"
        )
        return json.loads(self.manage("shell", "-c", code).strip().splitlines()[-1])

    def pulse(self, count: int, rate: float, queue: str = "sim") -> int:
        """A pulse job (`count` events at `rate`/s). On `gpu` it is placed on that queue directly
        (no gpu kind is cheap on CPU), so a drill can have a job on each worker."""
        if queue == "sim":
            return self.api("/api/jobs/", {"kind": "pulse", "params": {"count": count, "rate": rate}})["id"]
        return self.pulses(count, rate, queue, 1)[0]

    def pulses(self, count: int, rate: float, queue: str, n: int) -> list[int]:
        """`n` pulse jobs placed on `queue` at once (one `manage.py shell`: a start of its own takes
        seconds on a loaded machine, as long as a short job runs)."""
        code = (
            "from heliosweb.jobs.models import BenchmarkJob; from heliosweb.jobs.tasks import run_job\n"
            f"for _ in range({n}):\n"
            f"    j = BenchmarkJob.objects.create(kind='pulse', queue='{queue}', params={{'count': {count}, 'rate': {rate}}})\n"
            f"    run_job.apply_async(args=[j.pk], queue='{queue}', task_id=f'job-{{j.pk}}'); print(j.pk)\n"
        )
        return [int(line) for line in self.manage("shell", "-c", code).strip().splitlines()[-n:]]

    def wait_status(self, job_id: int, *statuses: str, timeout: float = 120) -> dict:
        def reached() -> dict | None:
            try:
                job = self.job(job_id)
            except (OSError, urllib.error.HTTPError):
                return None  # the web server restarting
            return job if job["status"] in statuses else None

        return wait_until(reached, timeout=timeout, interval=0.2, what=f"job {job_id} to be {'/'.join(statuses)}")

    def events(self, job_id: int) -> list[dict]:
        found: list[dict] = []
        while True:
            batch = self.api(f"/api/jobs/{job_id}/events/?after={found[-1]['seq'] if found else 0}")
            batch = batch["events"] if isinstance(batch, dict) else batch
            if not batch:
                return found
            found += batch

    def assert_done_with_every_event(self, job_id: int, count: int, *, stopped: bool = False) -> None:
        """Done, its events numbered 1..last_seq without a gap, every measurement of the pulse there."""
        if stopped:
            job = self.stored(job_id)
            events = job["events"]
        else:
            job = self.wait_status(job_id, "done", "failed", "cancelled")
            events = self.events(job_id)
        assert job["status"] == "done", job["error"]
        assert [e["seq"] for e in events] == list(range(1, job["last_seq"] + 1))
        assert [e["i"] for e in events if e["type"] == "measurement"] == list(range(count))
