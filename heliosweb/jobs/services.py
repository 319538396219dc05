"""Writes for benchmark jobs: create (the one place input is validated), run, cancel, fail, reap.

Events take one path: numbered, stored in the database, then sent to the channel group
`job.<id>` in batches (one group message every ~50 ms: channels_redis drops group messages once a
channel holds 100 unread ones, so the page gets few, larger messages and refills gaps from the
database by number).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from heliosweb.catalogs.selectors import boot_catalogs
from heliosweb.catalogs.services import boot_create
from heliosweb.processes import pid_alive
from heliosweb.recipes.models import Recipe
from scheduler_core.errors import InvalidInput

from .models import BenchmarkJob, JobEvent, JobStatus
from .registry import JobKind, get_kind
from .selectors import job_as_api

log = logging.getLogger(__name__)
# The job whose analysis runs in this thread: an analysis that serves a recipe (the simulated
# engine) reads the job's recipe and id here, its params stay the kind's declared ones.
running_job: ContextVar[BenchmarkJob | None] = ContextVar("running_job", default=None)

TERMINAL_EVENTS = ("done", "failed", "cancelled")


class JobCancelled(Exception):
    """Raised inside a running analysis (at its next event) once a cancel was requested."""


def group_name(job_id: int) -> str:
    return f"job.{job_id}"


LIST_GROUP = "jobs"  # every job's status and progress, for the pages that list jobs
ANNOUNCE_EVERY_S = 0.5  # progress on the lists: a running job is announced at most this often


# --- create / cancel ------------------------------------------------------------------------


def job_create(
    *, kind: Any, recipe: Any = None, params: Any = None, user: AbstractBaseUser | None = None
) -> BenchmarkJob:
    """Validate everything, store the job `queued`, and queue it once the transaction commits.

    Raises InvalidInput naming the field (`kind`, `recipe`, `params.<name>`); nothing is stored
    or queued then.
    """
    job_kind = get_kind(kind)
    recipe_obj = _recipe_or_none(recipe)
    if job_kind.queue == "gpu" and job_kind.name == "capture" and recipe_obj is None:
        raise InvalidInput("recipe", "a capture stores its catalog under a recipe: choose one")
    if params is not None and not isinstance(params, Mapping):
        raise InvalidInput("params", "must be an object of parameter names to values")
    try:
        clean = job_kind.analysis.validate(_with_boot_catalogs(job_kind, params or {}))
    except InvalidInput as exc:
        raise InvalidInput(f"params.{exc.field}", exc.message) from None
    with transaction.atomic():
        job = BenchmarkJob.objects.create(
            kind=job_kind.name,
            queue=job_kind.queue,
            recipe=recipe_obj,
            params=clean,
            created_by=user if user and user.is_authenticated else None,
        )
        transaction.on_commit(lambda: (_enqueue(job), announce(job.pk)))
    return job


def _with_boot_catalogs(kind: JobKind, params: Mapping[str, Any]) -> dict[str, Any]:
    """A catalog parameter may name stored boots instead of spelling a catalog out:
    `{"boot": id}` (catalog) or `{"boots": [id, ...]}` (catalog_list). The job keeps the catalogs
    themselves, so it stays reproducible whatever happens to the boots later."""
    out = dict(params)
    for p in kind.analysis.params:
        value = out.get(p.name)
        ref = {"catalog": "boot", "catalog_list": "boots"}.get(p.kind)
        if ref is None or not isinstance(value, Mapping) or set(value) != {ref}:
            continue
        ids = [value[ref]] if p.kind == "catalog" else value[ref]
        if not isinstance(ids, list):
            raise InvalidInput(f"{p.name}.{ref}", "must be a list of boot ids")
        catalogs = boot_catalogs(ids=ids, field=f"{p.name}.{ref}")
        out[p.name] = catalogs[0] if p.kind == "catalog" else catalogs
    return out


def _recipe_or_none(recipe: Any) -> Recipe | None:
    if recipe in (None, ""):
        return None
    if not isinstance(recipe, str):
        raise InvalidInput("recipe", "must be a recipe name")
    found = Recipe.objects.filter(name=recipe).first()
    if found is None:
        raise InvalidInput("recipe", f"unknown recipe {recipe!r}")
    return found


def _enqueue(job: BenchmarkJob) -> None:
    from .tasks import run_job

    try:
        run_job.apply_async(args=[job.pk], queue=job.queue, task_id=f"job-{job.pk}")
    except Exception as exc:  # the broker is down: say so on the job instead of leaving it queued forever
        log.exception("could not queue job %s", job.pk)
        job_fail(job_id=job.pk, reason=f"could not queue the job: {exc}", from_status=(JobStatus.QUEUED,))


def job_cancel(*, job: BenchmarkJob) -> BenchmarkJob:
    """Queued: cancelled at once. Running: the worker stops at the analysis's next event."""
    job.refresh_from_db(fields=["status"])
    if job.status == JobStatus.QUEUED:
        if BenchmarkJob.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
            status=JobStatus.CANCELLED, finished_at=timezone.now(), error="cancelled before it started"
        ):
            _append_event(job.pk, {"type": "cancelled", "reason": "cancelled before it started"})
    elif job.status == JobStatus.RUNNING:
        BenchmarkJob.objects.filter(pk=job.pk).update(cancel_requested=True)
    else:
        raise InvalidInput("status", f"job {job.pk} is already {job.status}")
    job.refresh_from_db()
    return job


# --- run (called by the Celery task) ----------------------------------------------------------


def job_run(*, job_id: int) -> None:
    """Run a queued job. Idempotent by job id: a redelivered task never runs a job twice."""
    me_host, me_pid = socket.gethostname(), os.getpid()
    with transaction.atomic():
        job = BenchmarkJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            log.warning("job %s does not exist; dropping its task", job_id)
            return
        if job.status == JobStatus.RUNNING:
            if job.worker_host == me_host and job.worker_pid == me_pid:
                return  # the same process got the message twice
            if job.worker_host == me_host and pid_alive(job.worker_pid):
                return  # still running in another live process
            stale = True
        elif job.status != JobStatus.QUEUED:
            return  # finished or cancelled: nothing to do
        else:
            stale = False
            now = timezone.now()
            BenchmarkJob.objects.filter(pk=job_id).update(
                status=JobStatus.RUNNING, started_at=now, heartbeat_at=now, worker_host=me_host, worker_pid=me_pid
            )
    if stale:
        job_fail(job_id=job_id, reason=f"worker lost mid-job (process {job.worker_pid} on {job.worker_host} vanished)")
        return
    job.refresh_from_db()
    announce(job.pk)
    kind = get_kind(job.kind)
    pump = EventPump(job)
    pump.start()
    running = running_job.set(job)
    try:
        result = kind.analysis.run(dict(job.params), pump.emit)
    except JobCancelled:
        pump.stop()
        _finish(
            job,
            JobStatus.CANCELLED,
            error="cancelled while running",
            event={"type": "cancelled", "reason": "cancelled while running"},
        )
    except Exception as exc:
        log.exception("job %s failed", job_id)
        pump.stop()
        reason = f"{type(exc).__name__}: {exc}"
        _finish(job, JobStatus.FAILED, error=reason, event={"type": "failed", "reason": reason})
    else:
        pump.stop()
        try:
            with transaction.atomic():  # the boots and the job's result land together, or neither does
                _store_boots(job, result)
                _finish(job, JobStatus.DONE, result=result, event={"type": "done"})
        except InvalidInput as exc:
            reason = f"the capture's catalog could not be stored: {exc}"
            _finish(job, JobStatus.FAILED, error=reason, event={"type": "failed", "reason": reason})
    finally:
        running_job.reset(running)


def _store_boots(job: BenchmarkJob, result: dict[str, Any]) -> None:
    """A capture's catalogs become boots of its recipe, one per repeated boot."""
    if job.kind == "capture" and job.recipe_id and "catalog" in result:
        for boot in result.get("boots", [result]):
            boot_create(
                recipe=job.recipe, catalog=boot["catalog"], provenance=boot.get("provenance", {}), job_id=job.pk
            )


def _finish(job: BenchmarkJob, status: str, *, event: dict[str, Any], result: Any = None, error: str = "") -> None:
    fields: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "error": error}
    if result is not None:
        fields["result"] = result
    if status == JobStatus.DONE:
        job.refresh_from_db(fields=["progress_total"])
        fields["progress_done"] = max(job.progress_total, 1)
        fields["progress_total"] = max(job.progress_total, 1)
    # Only a job still marked running is finished here: the reaper may have failed it already.
    if BenchmarkJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(**fields):
        _append_event(job.pk, event)


def job_fail(*, job_id: int, reason: str, from_status: tuple[str, ...] = (JobStatus.RUNNING,)) -> bool:
    """Mark a job failed with a reason (keeping the events and results stored so far)."""
    updated = BenchmarkJob.objects.filter(pk=job_id, status__in=from_status).update(
        status=JobStatus.FAILED, error=reason, finished_at=timezone.now()
    )
    if updated:
        _append_event(job_id, {"type": "failed", "reason": reason})
    return bool(updated)


def jobs_reap(*, stale_seconds: float | None = None) -> list[int]:
    """Fail running jobs whose worker vanished: a dead process on this host, or a stale heartbeat."""
    stale_seconds = settings.HELIOS_JOB_STALE_SECONDS if stale_seconds is None else stale_seconds
    host = socket.gethostname()
    cutoff = timezone.now() - timedelta(seconds=stale_seconds)
    reaped = []
    for job in BenchmarkJob.objects.filter(status=JobStatus.RUNNING).only(
        "id", "worker_host", "worker_pid", "heartbeat_at"
    ):
        if job.worker_host == host and not pid_alive(job.worker_pid):
            reason = f"worker lost mid-job (process {job.worker_pid} on {host} is gone)"
        elif job.heartbeat_at is None or job.heartbeat_at < cutoff:
            reason = (
                f"worker lost mid-job (no heartbeat from {job.worker_host or 'its worker'} for {stale_seconds:.0f} s)"
            )
        else:
            continue
        if job_fail(job_id=job.pk, reason=reason):
            reaped.append(job.pk)
    return reaped


# --- events -----------------------------------------------------------------------------------


def _append_event(job_id: int, event: dict[str, Any]) -> JobEvent:
    """Store one event under the next number and send it; used outside a running pump. Sent only
    once the caller's transaction commits: a listener told `done` must find the job done."""
    with transaction.atomic():
        job = BenchmarkJob.objects.select_for_update().only("last_seq").get(pk=job_id)
        seq = job.last_seq + 1
        event = {**event, "ts": event.get("ts", time.time())}
        stored = JobEvent.objects.create(job_id=job_id, seq=seq, type=event["type"], data=_data(event))
        BenchmarkJob.objects.filter(pk=job_id).update(last_seq=seq)
        transaction.on_commit(lambda: (_send(job_id, [stored.as_message()]), announce(job_id)))
    return stored


def _data(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in ("type", "seq")}


def announce(job_id: int) -> None:
    """Best effort: tell the job lists (dashboard, /jobs/) where a job stands now."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        job = BenchmarkJob.objects.select_related("recipe", "created_by").get(pk=job_id)
        async_to_sync(layer.group_send)(LIST_GROUP, {"type": "jobs.status", "job": job_as_api(job, full=False)})
    except Exception:
        log.warning("could not announce job %s to the job lists", job_id, exc_info=True)


def _send(job_id: int, messages: list[dict[str, Any]]) -> None:
    """Best effort: Redis is transport; a client that misses a batch refills it from the database."""
    layer = get_channel_layer()
    if layer is None or not messages:
        return
    try:
        async_to_sync(layer.group_send)(group_name(job_id), {"type": "job.events", "events": messages})
    except Exception:
        log.warning("could not send %d events of job %s to the channel layer", len(messages), job_id, exc_info=True)


class EventPump:
    """Numbers, stores and sends a running job's events in batches, from a background thread that
    also writes the heartbeat and notices cancel requests."""

    def __init__(self, job: BenchmarkJob) -> None:
        self.job_id = job.pk
        self.seq = job.last_seq
        self.interval = settings.HELIOS_EVENT_FLUSH_SECONDS
        self.heartbeat_every = settings.HELIOS_HEARTBEAT_SECONDS
        self._buffer: list[dict[str, Any]] = []
        self._progress: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._cancelled = False
        self._thread = threading.Thread(target=self._loop, name=f"events-job-{job.pk}", daemon=True)
        self._last_heartbeat = time.monotonic()
        self._last_announce = 0.0

    def emit(self, event: dict[str, Any]) -> None:
        if self._cancelled:
            raise JobCancelled()
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return
        with self._lock:
            self.seq += 1
            message = {**event, "seq": self.seq}
            message.setdefault("ts", time.time())
            self._buffer.append(message)
            if event["type"] == "progress":
                self._progress = event

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def _loop(self) -> None:
        try:
            while True:
                stopping = self._stopping
                self._flush()
                if stopping:
                    return
                self._wake.wait(self.interval)
        finally:
            connection.close()

    def _flush(self) -> None:
        with self._lock:
            batch, self._buffer = self._buffer, []
            progress, self._progress = self._progress, None
        now = time.monotonic()
        beat = now - self._last_heartbeat >= self.heartbeat_every
        if not batch and not beat:
            return
        close_old_connections()
        try:
            fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
            with transaction.atomic():
                if batch:
                    JobEvent.objects.bulk_create(
                        JobEvent(job_id=self.job_id, seq=m["seq"], type=m["type"], data=_data(m)) for m in batch
                    )
                    fields["last_seq"] = batch[-1]["seq"]
                if progress:
                    fields.update(
                        progress_done=max(0, int(progress.get("done", 0))),
                        progress_total=max(0, int(progress.get("total", 0))),
                        progress_message=str(progress.get("message", ""))[:200],
                    )
                BenchmarkJob.objects.filter(pk=self.job_id).update(**fields)
            self._last_heartbeat = now
            if progress and now - self._last_announce >= ANNOUNCE_EVERY_S:
                self._last_announce = now
                announce(self.job_id)
            if BenchmarkJob.objects.filter(pk=self.job_id, cancel_requested=True).exists():
                self._cancelled = True
        except Exception:
            log.exception("could not store %d events of job %s", len(batch), self.job_id)
            return
        _send(self.job_id, batch)
