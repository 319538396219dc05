"""vLLM's OpenAI-compatible server (`vllm serve`) as a child process: started on a free-checked port with the plugin's settings,
waited for (`/health`) with a progress line, its death reported with the last lines of its log,
stopped by its own process group.

The CPU settings are the ones seen to work on a small shared machine (docs/engines.md): vLLM's CPU
backend reserves `gpu_memory_utilization` of the host's RAM, so it is kept low, and the KV cache
gets `VLLM_CPU_KVCACHE_SPACE` GiB.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from helios_vllm.models import CPU_ENGINE_ARGS

from .venv import Env

SCHEDULER_CLS = "helios_vllm.scheduler.HeliosScheduler"
# vLLM's `--shutdown-timeout`: the seconds its engine core gets to stop (drain, then tear down, the
# scheduler's `shutdown` last, where the plugin posts or spools what it holds). vLLM's default, 0,
# kills the engine core the moment the server stops: its unsealed records were lost (issue 28).
SHUTDOWN_TIMEOUT_S = 10
START_TIMEOUT_S = 600.0
PROGRESS_S = 10.0
LOG_TAIL = 15


class ServerError(RuntimeError):
    """vLLM could not be started or died; the message says why in a line or two."""


@dataclass(frozen=True)
class ServeConfig:
    """How `vllm serve` runs: the model directory, the port, the chunk budget (vLLM's
    `max_num_batched_tokens`), the device, the scheduler class (None: vLLM's own) and the plugin's
    environment (`HELIOS_URL`, `HELIOS_RECIPE`, `HELIOS_TOKEN`, `HELIOS_ENGINE`, `HELIOS_SPOOL`)."""

    model: Path
    port: int
    log: Path
    max_num_batched_tokens: int = CPU_ENGINE_ARGS["max_num_batched_tokens"]
    max_model_len: int = CPU_ENGINE_ARGS["max_model_len"]
    device: str = "cpu"
    scheduler_cls: str | None = SCHEDULER_CLS
    env: Mapping[str, str] = field(default_factory=dict)
    prefix_caching: bool = True  # off: the same prompt served twice (once per policy) is computed twice
    host: str = "127.0.0.1"

    def command(self, python: Path) -> list[str]:
        # `vllm serve`'s own arguments through its module: the `vllm` console script of vllm-cpu
        # 0.32 asks for the version of a distribution named "vllm" and exits (PackageNotFoundError).
        cmd = [
            *(str(python), "-m", "vllm.entrypoints.openai.api_server"),
            *("--model", str(self.model), "--host", self.host, "--port", str(self.port)),
            *("--load-format", "dummy", "--skip-tokenizer-init", "--served-model-name", "helios"),
            *("--max-num-batched-tokens", str(self.max_num_batched_tokens), "--enable-chunked-prefill"),
            *("--max-model-len", str(self.max_model_len)),
            *("--shutdown-timeout", str(SHUTDOWN_TIMEOUT_S)),
        ]
        if self.device == "cpu":
            cmd += ["--gpu-memory-utilization", str(CPU_ENGINE_ARGS["gpu_memory_utilization"])]
        if not self.prefix_caching:
            cmd.append("--no-enable-prefix-caching")
        if self.scheduler_cls:
            cmd += ["--scheduler-cls", self.scheduler_cls]
        return cmd

    def environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        env = dict(os.environ, **extra, **self.env)
        if self.device == "cpu":
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        env.setdefault("VLLM_LOGGING_LEVEL", "INFO")
        return env


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


class VllmServer:
    """One `vllm serve` child in its own process group (Ctrl-C reaches our front, which stops it)."""

    def __init__(self, env: Env, config: ServeConfig) -> None:
        self.env, self.config = env, config
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://{config.host}:{config.port}"

    def start(self, say: Callable[[str], None], timeout_s: float = START_TIMEOUT_S) -> None:
        if not port_free(self.config.port, self.config.host):
            raise ServerError(f"port {self.config.port} is in use by another program; choose another with --vllm-port")
        self.config.log.parent.mkdir(parents=True, exist_ok=True)
        with self.config.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.config.command(self.env.python),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.config.environment(self.env.environment()),
                cwd=self.config.log.parent,  # vLLM writes nothing here, but never into the checkout
                start_new_session=True,
            )
        self.wait_healthy(say, timeout_s)

    def wait_healthy(self, say: Callable[[str], None], timeout_s: float) -> None:
        started = time.monotonic()
        said = started
        while not self.healthy():
            self.check_alive()
            now = time.monotonic()
            if now - started > timeout_s:
                self.stop()
                raise ServerError(f"vLLM did not answer /health within {timeout_s:.0f} s\n{self.log_tail()}")
            if now - said >= PROGRESS_S:
                said = now
                say(f"starting vLLM: {now - started:.0f} s, {self.last_log_line()}")
            time.sleep(1.0)
        say(f"vLLM serves on {self.url} ({time.monotonic() - started:.0f} s to start; log {self.config.log})")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def check_alive(self) -> None:
        """Raise with the log's last lines if the child exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerError(f"vLLM exited with status {self.proc.returncode}; its last log lines:\n{self.log_tail()}")

    def log_tail(self, lines: int = LOG_TAIL) -> str:
        try:
            text = self.config.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join("  " + ln for ln in text[-lines:])

    def last_log_line(self) -> str:
        """The log's last line without vLLM's `(APIServer pid=N) LEVEL date time [file:line]` prefix."""
        tail = re.sub(r"^(\(\w+ pid=\d+\) )?(\w+ [\d-]+ [\d:]+ \[[^\]]*\] )?", "", self.log_tail(1).strip())
        return tail[:120] if tail else "waiting for its first log line"

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM to vLLM's server process, which stops its engine core itself (the plugin's
        shutdown posts or spools what it holds); the group is waited for, and only what is left
        of it after `grace_s` is killed."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace_s)
        while time.monotonic() < deadline and _group_alive(proc.pid):
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group is left (an engine core that hung)
        proc.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
