"""Which job workers are alive, and the jobs waiting on one that froze.

A frozen worker (SIGSTOP, a stalled VM) keeps its Redis connections open, so Redis hands it the
next message of its queue and nothing fails: each worker's main process says it is alive (a Redis
hash; in-process without Redis) and the reaper names a silent one on its queue's waiting jobs and
sends them again once to a live worker (docs/operations.md, "a worker frozen").
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from typing import Any

import redis
from django.conf import settings
from django.db.models import Q

from heliosweb.common.processes import pid_alive

from ..models import BenchmarkJob, JobStatus
from .events import job_announce

log = logging.getLogger(__name__)

FORGET_AFTER_S = 3600.0  # a worker silent this long is forgotten (stopped without a word, another host)
WAITING_NOTE = "waiting: worker "


def _key(name: str) -> str:
    return f"{settings.CELERY_BROKER_TRANSPORT_OPTIONS['global_keyprefix']}helios:{name}"


_local: dict[str, str] = {}  # without Redis (tests, one process)
_client: redis.Redis | None = None


def _redis() -> redis.Redis | None:
    global _client
    if not settings.REDIS_URL:
        return None
    if _client is None:
        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    return _client


def worker_id(name: str, pid: int | None = None) -> str:
    """A worker as one process: two started under one node name (a restart, a second `dev worker`) stay apart."""
    return f"{name}#{pid or os.getpid()}"


def worker_alive(*, name: str, queues: list[str], pid: int | None = None, at: float | None = None) -> None:
    """Say that worker `name` (this process, unless `pid`) taking `queues` is alive now."""
    value = json.dumps({"name": name, "queues": queues, "host": socket.gethostname(), "pid": pid or os.getpid(),
                        "at": time.time() if at is None else at})  # fmt: skip
    client = _redis()
    if client is None:
        _local[worker_id(name, pid)] = value
    else:
        client.hset(_key("workers"), worker_id(name, pid), value)


def worker_gone(*, name: str) -> None:
    """A worker that stops cleanly leaves the list."""
    client = _redis()
    if client is None:
        _local.pop(worker_id(name), None)
    else:
        client.hdel(_key("workers"), worker_id(name))


def workers_heard() -> dict[str, dict[str, Any]]:
    """Every worker that said it is alive, by id, forgetting those gone (a dead process on this
    host, or silent for an hour)."""
    client = _redis()
    raw = dict(_local) if client is None else {_text(k): _text(v) for k, v in client.hgetall(_key("workers")).items()}
    found, host, now = {}, socket.gethostname(), time.time()
    for wid, value in raw.items():
        info = json.loads(value)
        if (info["host"] == host and not pid_alive(info["pid"])) or now - info["at"] > FORGET_AFTER_S:
            if client is None:
                _local.pop(wid, None)
            else:
                client.hdel(_key("workers"), wid)
            continue
        found[wid] = info
    return found


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def start_heartbeat(*, name: str, queues: list[str]) -> threading.Event:
    """In a worker's main process: say it is alive until the returned event is set. A thread of
    the process that takes the messages: frozen with it, so its silence means what it should."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            try:
                worker_alive(name=name, queues=queues)
            except redis.RedisError as exc:  # Redis away or refusing writes: the next beat tries again
                log.warning("worker heartbeat not written: %s", exc)
            stop.wait(settings.HELIOS_WORKER_BEAT_SECONDS)

    threading.Thread(target=beat, name="helios-worker-heartbeat", daemon=True).start()
    return stop


def jobs_note_frozen_workers(*, resend: Any) -> list[int]:
    """For each queue with a silent worker: note it on the queue's waiting jobs and, when a live
    worker takes the queue, `resend(job)` once each; the ids of the jobs sent again. Clears the
    note where no worker of the queue is silent any more."""
    now, silent_after = time.time(), settings.HELIOS_WORKER_SILENT_SECONDS
    silent: dict[str, dict[str, Any]] = {}
    live: set[str] = set()
    info: dict[str, Any] | None
    for info in workers_heard().values():
        for queue in info["queues"]:
            if now - info["at"] > silent_after:
                silent.setdefault(queue, info)
            else:
                live.add(queue)
    resent = []
    for job in BenchmarkJob.objects.filter(status=JobStatus.QUEUED).filter(
        Q(queue__in=list(silent)) | Q(progress_message__startswith=WAITING_NOTE)
    ):
        info = silent.get(job.queue)
        if info is None:
            note = ""
        else:
            note = f"{WAITING_NOTE}{info['name']} (pid {info['pid']}) has not answered for {now - info['at']:.0f} s"
            if job.queue in live:
                note += "; sent to a live worker"
        if note == job.progress_message:
            continue
        first = job.queue in live and not job.progress_message.endswith("sent to a live worker")
        if BenchmarkJob.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(progress_message=note):
            if info is not None and first:
                resend(job)
                resent.append(job.pk)
            job_announce(job.pk)
    return resent
