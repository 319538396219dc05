"""One machine's stack kept by supervisord: its programs, their config, and a start after a crash.
supervisord restarts a child that dies (backing off) and stops them in priority order: web, the job
workers (each a warm shutdown within `HELIOS_DRAIN_SECONDS`), maintenance, Redis last. Every process
carries `HELIOS_STACK=<var dir>`, so what a crashed supervisord left is found and stopped in that
order, never by pid files that may name someone else's process.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import time
import xmlrpc.client
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from heliosweb.common.processes import DEFAULT_DRAIN_SECONDS, parent_pid, pid_alive

PY = sys.executable
STACK_ENV = "HELIOS_STACK"
ENGINE_THREADS = 4  # simulated engines at once (one per recipe)


@dataclass(frozen=True)
class Program:
    """One supervised command. `priority`: started low to high, stopped high to low."""

    name: str
    command: list[str]
    priority: int
    stop_wait_s: float = 20


def drain_seconds() -> float:
    """How long a stop lets running jobs finish (Celery warm shutdown) before failing them."""
    return float(os.environ.get("HELIOS_DRAIN_SECONDS") or DEFAULT_DRAIN_SECONDS)


def sim_concurrency() -> int:
    return int(os.environ.get("HELIOS_SIM_CONCURRENCY", "0")) or os.cpu_count() or 1


def celery_worker_cmd(queues: str, *, concurrency: int = 1, name: str | None = None) -> list[str]:
    """A gpu worker runs solo (CUDA cannot start in a forked child), one per device, named after its
    CUDA_VISIBLE_DEVICES. Never with beat inside (`-B`): beat is a program of its own."""
    gpu = "gpu" in queues.split(",")
    solo = gpu or queues == "maint"  # maintenance is light: no pool process to fork
    pool = ["--pool=solo"] if solo else ["--pool=prefork", f"--concurrency={concurrency}"]
    if queues == "engine":  # simulated engines run for hours, one thread each (mostly asleep between ticks)
        pool = ["--pool=threads", f"--concurrency={ENGINE_THREADS}"]
    cmd = [PY, "-m", "celery", "-A", "heliosweb", "worker", "-Q", queues, "--loglevel=INFO"]
    cmd += ["-n", name or worker_name(queues), *pool, "--without-gossip", "--without-mingle"]
    return cmd


def worker_name(queues: str, instance: str = "") -> str:
    """`sim@host`, `gpu-cuda1@host`; with `instance` (`./dev worker`: its pid) `sim.4242@host`, so a
    worker started by hand never takes the name of the stack's own, nor of another one."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    devices = f"-cuda{visible.replace(',', '-')}" if "gpu" in queues.split(",") and visible else ""
    return f"{queues.replace(',', '-')}{devices}{'.' + instance if instance else ''}@%h"


def celery_beat_cmd(var: Path) -> list[str]:
    """Beat supervised on its own, so a killed worker leaves no orphan beat and a killed beat is
    restarted. Its pid file refuses a second beat of this stack; its Redis lease
    (`common.beat_lock`) keeps another host's beat waiting as a standby."""
    run = var / "run"
    return [
        *(PY, "-m", "celery", "-A", "heliosweb", "beat", "--loglevel=INFO"),
        *("--schedule", str(var / "celerybeat-schedule"), "--pidfile", str(run / "celerybeat.pid")),
    ]


LISTEN_BACKLOG = 1024  # Twisted's default of 50 resets connections when hundreds of pages (re)connect at once
WS_CONNECT_TIMEOUT_S = 30  # daphne's default 5 s dropped handshakes queued behind a burst of reconnects


def web_cmd(host: str, port: int, application: str = "heliosweb.asgi:application") -> list[str]:
    """daphne on `host:port`, sized for a burst of pages (re)connecting at once (500 viewers overflowed
    the default backlog and handshake timeout while their logins queued on the database thread)."""
    interface = host.replace(":", r"\:")  # an IPv6 address, escaped as Twisted endpoint strings want
    endpoint = f"tcp:port={port}:interface={interface}:backlog={LISTEN_BACKLOG}"
    return [PY, "-m", "daphne", "-e", endpoint, "--websocket_connect_timeout", str(WS_CONNECT_TIMEOUT_S), application]


def programs(*, var: Path, host: str, port: int, redis_cmd: list[str] | None) -> list[Program]:
    """The stack: Redis (unless REDIS_URL names one), beat, the maintenance and job workers, web."""
    drain = drain_seconds()
    job_stop_wait = drain + 30  # time to notice the stop at the job's next event, then exit
    found = [
        Program("worker-maint", celery_worker_cmd("maint"), 20),
        Program("beat", celery_beat_cmd(var), 25),
        Program("worker-sim", celery_worker_cmd("sim", concurrency=sim_concurrency()), 30, job_stop_wait),
        Program("worker-sim-long", celery_worker_cmd("sim_long"), 30, job_stop_wait),
        Program("worker-gpu", celery_worker_cmd("gpu"), 30, job_stop_wait),
        Program("worker-engine", celery_worker_cmd("engine"), 30, job_stop_wait),  # starts no engine by itself
        Program("web", web_cmd(host, port), 40, 10),
    ]
    if redis_cmd:
        found.insert(0, Program("redis", redis_cmd, 10))
    return found


# One supervisord group: stopped together, so their drains run side by side.
JOB_WORKERS = ("worker-sim", "worker-sim-long", "worker-gpu", "worker-engine")


class Paths:
    """Where a stack keeps its supervisord config, control socket, pid file and logs (under var/)."""

    def __init__(self, var: Path) -> None:
        self.var = var
        self.conf = var / "supervisor" / "supervisord.conf"
        self.sock = var / "run" / "supervisor.sock"
        self.pidfile = var / "run" / "supervisord.pid"
        self.logs = var / "log"

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"


def _q(value: object) -> str:
    """A value for supervisor's ini file: `%` is its interpolation character."""
    return str(value).replace("%", "%%")


def write_config(paths: Paths, progs: list[Program], root: Path) -> None:
    for d in (paths.conf.parent, paths.sock.parent, paths.logs):
        d.mkdir(parents=True, exist_ok=True)
    lines = [
        "; written by `./dev up` on every start: edit heliosweb/stack.py, not this file",
        "[unix_http_server]",
        f"file={_q(paths.sock)}",
        "chmod=0700",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "[supervisorctl]",
        f"serverurl=unix://{_q(paths.sock)}",
        "[supervisord]",
        "nodaemon=true",
        "silent=true",
        f"logfile={_q(paths.log('supervisord'))}",
        "logfile_maxbytes=5MB",
        "logfile_backups=2",
        f"pidfile={_q(paths.pidfile)}",
        f"directory={_q(root)}",
    ]
    for p in progs:
        lines += [
            f"[program:{p.name}]",
            f"command={_q(shlex.join(p.command))}",
            f"directory={_q(root)}",
            f"priority={p.priority}",
            "autostart=true",
            "autorestart=true",
            "startsecs=2",  # dying sooner counts as a failed start: retried with a growing delay
            "startretries=5",
            "stopsignal=TERM",  # the process itself: a Celery worker's warm shutdown keeps its pool running
            f"stopwaitsecs={int(p.stop_wait_s)}",
            "stopasgroup=false",
            "killasgroup=true",  # past the wait, the whole group: no orphaned pool process
            f"stdout_logfile={_q(paths.log(p.name))}",
            "stdout_logfile_maxbytes=5MB",
            "stdout_logfile_backups=2",
            "redirect_stderr=true",
        ]
    workers = [p.name for p in progs if p.name in JOB_WORKERS]
    lines += ["[group:jobs]", f"programs={','.join(workers)}", "priority=30"]
    paths.conf.write_text("\n".join(lines) + "\n")


def rpc(paths: Paths) -> xmlrpc.client.ServerProxy:
    from supervisor.xmlrpc import SupervisorTransport  # type: ignore[import-untyped]

    return xmlrpc.client.ServerProxy(
        "http://127.0.0.1", transport=SupervisorTransport(None, None, f"unix://{paths.sock}")
    )


def process_info(paths: Paths) -> list[dict]:
    """supervisord's view of every program (name, statename, pid, ...); [] when it does not answer."""
    try:
        return list(rpc(paths).supervisor.getAllProcessInfo())  # type: ignore[arg-type]
    except (OSError, xmlrpc.client.Fault, xmlrpc.client.ProtocolError):
        return []


def running_pids(paths: Paths) -> dict[str, int]:
    return {p["name"]: p["pid"] for p in process_info(paths) if p["statename"] == "RUNNING"}


def live_supervisord(paths: Paths) -> int | None:
    """The pid of this var dir's supervisord, if one runs (it outlives a killed `./dev up`)."""
    try:
        pid = int(paths.pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if pid_alive(pid) and _stack_of(pid) == str(paths.var) and "supervisord" in _cmdline(pid) else None


# --- what a crashed supervisord left running ---------------------------------------------------


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _stack_of(pid: int) -> str | None:
    try:
        entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    prefix = f"{STACK_ENV}=".encode()
    return next((e[len(prefix) :].decode(errors="replace") for e in entries if e.startswith(prefix)), None)


def stack_processes(var: Path) -> list[int]:
    """Every live process of this var dir's stack (a worker's pool processes too), but the caller."""
    me, redis_dir = os.getpid(), str(var / "redis")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me or not pid_alive(pid := int(entry.name)):
            continue
        # Redis rewrites its title over its environment; it is known by its data directory instead.
        if _stack_of(pid) == str(var) or (_cwd(pid) == redis_dir and "redis-server" in _cmdline(pid)):
            found.append(pid)
    return found


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def leftovers(var: Path) -> dict[str, list[int]]:
    """The stack's top processes left without their supervisord, by kind (pool processes go with their worker)."""
    ours = set(stack_processes(var))
    found: dict[str, list[int]] = {"web": [], "worker": [], "redis": []}
    for pid in sorted(ours):
        cmd = _cmdline(pid)
        if parent_pid(pid) in ours or not pid_alive(pid):
            continue
        kind = "web" if "daphne" in cmd else "redis" if "redis-server" in cmd else "worker" if "celery" in cmd else ""
        if kind:
            found[kind].append(pid)
    return found


def stop_leftovers(var: Path, say: Callable[[str], None]) -> None:
    """Stop what a crashed supervisord left, in a clean stop's order: web, the workers (a warm
    shutdown within the drain), Redis last (the workers need it until their jobs are done)."""
    found = leftovers(var)
    for kind, wait_s in (("web", 10.0), ("worker", drain_seconds() + 30), ("redis", 20.0)):
        _stop(found[kind], kind, wait_s, say)


def heal_leftovers(var: Path, say: Callable[[str], None]) -> None:
    """Before a new supervisord takes over: stop the old web server and Redis, which hold the ports
    the new ones need (Redis saves its append-only file on SIGTERM), and ask the old workers for a
    warm shutdown without waiting: they finish their jobs on the new Redis while the new stack serves."""
    found = leftovers(var)
    for kind in ("web", "redis"):
        _stop(found[kind], kind, 20.0, say)
    for pid in found["worker"]:
        say(f"old worker (pid {pid}) finishes its running jobs, then exits")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _stop(pids: list[int], kind: str, wait_s: float, say: Callable[[str], None]) -> None:
    for pid in pids:
        say(f"stopping stale {kind} (pid {pid}) left by a crashed start")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if pid_alive(pid):
            say(f"{kind} (pid {pid}) did not stop in {wait_s:.0f} s; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)


def echo(line: str, *, err: bool = False) -> None:
    """Print one line for the operator. Where the front's output is a file on a full disk, the line
    is lost rather than the front, which must outlive the fault to heal it."""
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr if err else sys.stdout, flush=True)


class LogFollower:
    """Prints what the programs write to their log files, each line after its program's name, so
    `./dev up` shows the whole stack in one terminal (even after it attached to a running one)."""

    def __init__(self, paths: Paths, names: list[str]) -> None:
        self.files = {name: paths.log(name) for name in names}
        self.offsets = {name: (f.stat().st_size if f.exists() else 0) for name, f in self.files.items()}
        self.width = max(len(n) for n in names)

    def poll(self) -> None:
        for name, path in self.files.items():
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size < self.offsets[name]:  # rotated by supervisord
                self.offsets[name] = 0
            if size == self.offsets[name]:
                continue
            with path.open("rb") as f:
                f.seek(self.offsets[name])
                chunk = f.read()
            complete = chunk.rfind(b"\n") + 1
            self.offsets[name] += complete
            for line in chunk[:complete].decode(errors="replace").splitlines():
                echo(f"{name:>{self.width}} | {line}")
