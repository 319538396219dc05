"""What the benches share: starting a server process and waiting for its port, and percentiles."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from heliosweb.devtool import free_port

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["ROOT", "free_port", "percentile", "serve", "stop", "throwaway_site"]


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank `p`-th percentile of `values` (not empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def serve(cmd: list[str], port: int, env: dict[str, str], log: Path, procs: list[subprocess.Popen]) -> None:
    """Start `cmd` (appended to `procs`, for the caller to stop) and wait until `port` accepts."""
    procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 60
    while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
        if time.monotonic() > deadline or procs[-1].poll() is not None:
            raise SystemExit(f"server did not start; see {log}")
        time.sleep(0.1)


def throwaway_site(prefix: str, **extra_env: str) -> tuple[Path, list[subprocess.Popen]]:
    """A migrated SQLite database in a new temporary folder (or `extra_env`'s DATABASE_URL), and Redis (REDIS_URL if set, else the
    bundled one, whose process is in the returned list); Django set up in this process."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    procs: list[subprocess.Popen] = []
    from heliosweb.devtool import start_redis

    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        proc, redis_url = start_redis(tmp / "redis")
        procs.append(proc)
    os.environ.update(
        {
            "REDIS_URL": redis_url,
            "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}",
            "HELIOS_VAR_DIR": str(tmp),
            "DJANGO_SETTINGS_MODULE": "heliosweb.settings",
            **extra_env,  # DATABASE_URL too, for a bench on PostgreSQL
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return tmp, procs


def stop(procs: list[subprocess.Popen]) -> None:
    """Stop what the bench started, newest first."""
    for proc in reversed(procs):
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
