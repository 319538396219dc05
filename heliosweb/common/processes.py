"""Process facts shared by the job reaper, the worker's drain on stop and `./dev up`."""

from __future__ import annotations

import os
from pathlib import Path

# How long a stop lets running jobs finish (HELIOS_DRAIN_SECONDS): read by the settings (the worker
# fails what is left with "stopped by operator") and by `./dev up` (supervisord's wait before a kill).
DEFAULT_DRAIN_SECONDS = 60.0


def pid_alive(pid: int | None) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped) counts as dead."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def parent_pid(pid: int) -> int:
    """The parent of `pid` (0 when it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def child_pids(pid: int) -> list[int]:
    """The direct children of `pid` (a prefork Celery worker's pool processes)."""
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and parent_pid(int(p.name)) == pid]
