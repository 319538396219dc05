"""A boot in a fresh process: a new interpreter, so a new CUDA context, allocator and cuBLAS
heuristics (on CPU a new process too), as an engine restart gets. Spread between such boots is
restart-to-restart noise; boots measured in one process would understate it.

`run_fresh_boot` (no torch imported here) starts `python -m gpu_runner.boot_process`, writes the
request as one JSON line on its stdin and reads JSON lines back: `ready` once torch is imported, an
`event` per progress step or measurement (forwarded as they land), then `result` (the stored boot)
or `error` (rebuilt here as the same error class).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scheduler_core.analyses.contract import Emit
from scheduler_core.errors import InvalidInput

from .errors import BY_NAME, BootFailed

ROOT = Path(__file__).resolve().parent.parent
BOOT_COMMAND = [sys.executable, "-m", "gpu_runner.boot_process"]


def run_fresh_boot(request: dict[str, Any], emit: Emit) -> dict[str, Any]:
    """Run one boot in a new process; its stored form, with `startup_s` (spawn to torch imported)
    and `boot_s` (spawn to result: what an engine restart would take) added to its provenance.
    Raises what the boot raised: InvalidInput (with its field), BootOutOfMemory,
    AttentionBackendError, else BootFailed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    outcome: dict[str, Any] | None = None
    began = time.perf_counter()
    startup_s = None
    with tempfile.TemporaryFile(mode="w+") as stderr:
        proc = subprocess.Popen(
            BOOT_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=ROOT, text=True
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            for line in proc.stdout:
                try:
                    message = json.loads(line)
                except ValueError:  # not ours: a library writing to the pipe before it was moved
                    sys.stderr.write(line)
                    continue
                if "ready" in message:
                    startup_s = time.perf_counter() - began
                elif "event" in message:
                    emit(message["event"])
                else:
                    outcome = message
                    break
        finally:
            proc.stdin.close()
            if outcome is None:
                proc.kill()
            proc.wait()
        stderr.seek(0)
        errors = stderr.read()
    if outcome is None:
        tail = "\n".join(errors.strip().splitlines()[-20:])
        raise BootFailed(f"boot {request['index']} process {proc.pid} exited with status {proc.returncode}: {tail}")
    if "error" in outcome:
        raise _rebuilt(outcome["error"], request["index"], proc.pid)
    if errors.strip():
        sys.stderr.write(errors)
    stored: dict[str, Any] = outcome["result"]
    stored["provenance"].update(startup_s=startup_s, boot_s=time.perf_counter() - began)
    return stored


def _rebuilt(error: dict[str, Any], index: int, pid: int) -> Exception:
    if error["type"] == "InvalidInput":
        return InvalidInput(error["field"], error["message"])
    if error["type"] in BY_NAME:
        return BY_NAME[error["type"]](error["message"])
    return BootFailed(f"boot {index} (process {pid}) failed: {error['type']}: {error['message']}\n{error['traceback']}")
