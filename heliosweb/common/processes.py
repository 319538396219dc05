"""Is a process still alive? Shared by the job reaper and the `./dev` supervisor."""

from __future__ import annotations

import os


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
