"""The child side of a fresh-process boot (`python -m gpu_runner.boot_process`, started by
`fresh_boot.run_fresh_boot`): read the request line, boot, answer in JSON lines. Its own stdout is
moved to stderr so nothing else reaches the pipe, and it exits when its stdin closes: a job that
stops (cancelled, worker lost) takes its boot process with it."""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import traceback
from typing import Any

from .analyses import boot_here
from .events import Progress


def main() -> int:
    """Read the request, boot, answer; torch is imported here, after the pipe is set up."""
    pipe = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    request = json.loads(sys.stdin.readline())
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()

    def send(message: dict[str, Any]) -> None:
        pipe.write(json.dumps(message) + "\n")

    importlib.import_module("torch")  # before `ready`: the parent's startup_s is spawn to torch imported
    send({"ready": os.getpid()})
    done, total = request["progress"]
    steps = Progress(lambda event: send({"event": event}), total, done)
    try:
        _, stored = boot_here(
            request["params"], [tuple(s) for s in request["shapes"]], request["field"], steps, request["index"]
        )
    except Exception as exc:
        send(
            {
                "error": {
                    "type": type(exc).__name__,
                    "field": getattr(exc, "field", None),
                    "message": getattr(exc, "message", str(exc)),
                    "traceback": traceback.format_exc(limit=6),
                }
            }
        )
        return 1
    send({"result": stored})
    return 0


def _exit_when_stdin_closes() -> None:
    sys.stdin.read()
    os._exit(3)


if __name__ == "__main__":
    sys.exit(main())
