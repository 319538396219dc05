"""`EventPump`: a running job's events, numbered (`seq` from 1), stored and sent in batches by a
background thread (every `HELIOS_EVENT_FLUSH_SECONDS`), which also writes the heartbeat and
notices cancel requests. One group message per batch keeps far below channels_redis's 100-unread
limit; the numbers let a client refill any gap from the database. A batch the database refuses is
retried (`storage.stored`); one that cannot be stored ends the job, failed with the cause."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.utils import timezone

from heliosweb.common.bounds import BadJSON, check_numbers

from ..models import BenchmarkJob, JobEvent, JobStatus
from .events import event_data, events_send, job_announce
from .storage import JobFailure, failure_cause, stored

log = logging.getLogger(__name__)

ANNOUNCE_EVERY_S = 0.5  # progress on the lists: a running job is announced at most this often


class JobCancelled(Exception):
    """Raised inside a running analysis (at its next event) once a cancel was requested."""


class JobAbandoned(Exception):
    """Raised inside a running analysis (at its next event) once its job was failed from outside
    (a stop's drain ran out, the reaper): the work goes on for nobody, so it stops."""


def time_limit_exceeded(limit_s: float | None) -> JobFailure:
    return JobFailure(f"time limit exceeded ({limit_s or 0:g} s)")


class EventPump:
    def __init__(self, job: BenchmarkJob, *, time_limit_s: float | None = None) -> None:
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
        self._abandoned = False
        self._failure: JobFailure | None = None
        self._time_limit = time_limit_s
        self._deadline = time.monotonic() + time_limit_s if time_limit_s else None
        self._thread = threading.Thread(target=self._loop, name=f"events-job-{job.pk}", daemon=True)
        self._last_heartbeat = time.monotonic()
        self._last_announce = 0.0

    @property
    def failure(self) -> JobFailure | None:
        """Why the job must fail (its events could not be stored), once that happened."""
        return self._failure

    def emit(self, event: dict[str, Any]) -> None:
        """The analysis's `emit`: number and buffer one event. Raises, to end the analysis there:
        JobFailure (events not stored, a non-finite number, past the time limit), JobAbandoned
        (failed from outside), JobCancelled."""
        if self._failure is not None:
            raise self._failure
        if self._abandoned:
            raise JobAbandoned()
        if self._cancelled:
            raise JobCancelled()
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise time_limit_exceeded(self._time_limit)
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return
        try:
            check_numbers(event, "event")
        except BadJSON as exc:
            raise JobFailure(f"a {event['type']} event holds a non-finite number at event.{exc.field}") from None
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
        """Flush what is buffered and end the thread."""
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def _loop(self) -> None:
        try:
            while True:
                stopping = self._stopping
                try:
                    self._flush()
                except Exception as exc:  # never die silently: the buffered events would be lost, the job `done`
                    log.exception("job %s: the event pump failed", self.job_id)
                    self._failure = JobFailure(f"the job's events could not be stored: {failure_cause(exc)}")
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
        if (not batch and not beat) or self._failure is not None:
            return
        close_old_connections()
        try:
            what = f"{len(batch)} events of the job" if batch else "the job's heartbeat"
            if not stored(lambda: self._store(batch, progress), what=what):
                return
        except JobFailure as failure:
            self._failure = failure  # the analysis stops at its next event; the job fails with this
            return
        self._last_heartbeat = now
        if progress and now - self._last_announce >= ANNOUNCE_EVERY_S:
            self._last_announce = now
            try:
                job_announce(self.job_id)  # best effort, as every live send: the lists refill from the database
            except DatabaseError as exc:
                log.warning("job %s: progress not announced: %s", self.job_id, exc)
        events_send(self.job_id, batch)

    def _store(self, batch: list[dict[str, Any]], progress: dict[str, Any] | None) -> bool:
        """The batch, the job's progress, heartbeat and `last_seq`, in one transaction; False (and
        nothing written) once the job is no longer running."""
        fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
        with transaction.atomic():
            # Failed from outside (a stop, the reaper)? Its terminal event stays the last one.
            status, self._cancelled = (
                BenchmarkJob.objects.select_for_update()
                .filter(pk=self.job_id)
                .values_list("status", "cancel_requested")[0]
            )
            if status != JobStatus.RUNNING:
                self._abandoned = True
                return False
            if batch:
                JobEvent.objects.bulk_create(
                    JobEvent(job_id=self.job_id, seq=m["seq"], type=m["type"], data=event_data(m)) for m in batch
                )
                fields["last_seq"] = batch[-1]["seq"]
            if progress:
                fields.update(
                    progress_done=max(0, int(progress.get("done", 0))),
                    progress_total=max(0, int(progress.get("total", 0))),
                    progress_message=str(progress.get("message", ""))[:200],
                )
            BenchmarkJob.objects.filter(pk=self.job_id).update(**fields)
        return True
