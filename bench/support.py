"""What the benches share: starting a server process and waiting for its port, and percentiles."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from heliosweb.devtool import free_port

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["ROOT", "free_port", "percentile", "serve"]


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
