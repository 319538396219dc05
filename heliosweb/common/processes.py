"""Process facts shared by the job reaper, the worker's drain on stop and `./dev up`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# How long a stop lets running jobs finish (HELIOS_DRAIN_SECONDS): read by the settings (the worker
# fails what is left naming the stop's cause, `stop_cause`) and by `./dev up` (supervisord's wait before a kill).
DEFAULT_DRAIN_SECONDS = 60.0
FULL_DISK_BYTES = 2**20  # a disk with less free than this is full for the stop's cause


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


def stop_cause(*, supervisor_pid: int, var: Path) -> str:
    """Why a worker is asked to stop, as it can tell by itself (no message comes from a crashed
    process, nor through a full disk): var/'s disk full (supervisord dies on a log write), else its
    supervisord gone (`./dev up` is restarting the stack), else an operator's stop."""
    supervisor_gone = os.getppid() != supervisor_pid or not pid_alive(supervisor_pid)
    try:
        free = shutil.disk_usage(var).free
    except OSError:
        free = None
    if free is not None and free < FULL_DISK_BYTES:
        return f"stopped: the disk of {var} was full ({free:,} bytes free) and the stack was restarted"
    if supervisor_gone:
        return f"stopped: its supervisor (supervisord, pid {supervisor_pid}) died and the stack was restarted"
    return "stopped by operator"
