"""`TelemetryReporter`: an engine's launch and request records, posted in numbered batches.

`add` queues a record without blocking on the network; a batch is sealed at `batch_records`, after
`interval_s`, or when the policy version changes (the server takes one version per batch). A thread
posts the batches in order, each as `{schema, engine, session, batch, records}`: `session` is a
UUID picked per reporter, so an engine restarted at batch 1 is a new session, never a duplicate; a
failed post (network, 5xx, 429) is retried with backoff and jitter under the same number, which
the server stores once. Past `max_queued_records` waiting, `add` drops and counts
(`stats.dropped_records`). `close()` (also at interpreter exit) posts what is left.

With a `spool` directory a sealed batch survives the engine: written whole before its first post
(and while an earlier one retries), deleted once answered (`close` writes what it could not post),
and posted first by a later reporter on the same directory under its own session and number, so it
is never stored twice. Only the open batch (at most `interval_s` of records) is lost to a crash.
"""

from __future__ import annotations

import atexit
import gzip
import json
import logging
import os
import threading
import time
import urllib.parse
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .http import DEFAULT_BACKOFF, ApiError, Backoff, Connection
from .records import MAX_RECORDS, SCHEMA, Batch, LaunchRecord, RequestRecord, record_problem

log = logging.getLogger(__name__)


@dataclass
class ReporterStats:
    """Counters an engine may export or log; read them any time (each is one int)."""

    queued_records: int = 0  # waiting in memory now
    posted_batches: int = 0
    posted_records: int = 0
    retried_posts: int = 0  # posts repeated after a failure
    dropped_records: int = 0  # refused by `add` (memory bound) or still unsent when `close` gave up
    refused_batches: int = 0  # refused by the server (a 4xx other than 429): logged, not retried
    spooled_batches: int = 0  # left in the spool at close, for the next reporter on it to post
    resumed_batches: int = 0  # found in the spool at start (a previous run's), queued before new ones
    upgrade: str = ""  # the server's word when it reads this client's schema for a stated window only


@dataclass
class _Sealed:
    session: str
    number: int
    boot: int | None
    records: list[dict[str, Any]]
    spooled: bool = False  # written to the spool directory (then deleted once answered)

    @property
    def file_name(self) -> str:
        return f"{self.session}-{self.number:012d}.json"

    def body(self) -> dict[str, Any]:
        """The batch as posted, less `engine` (the reporter posting it names itself)."""
        body = Batch(SCHEMA, "", self.session, self.number, self.records, self.boot).to_dict()
        del body["engine"]
        return body


class TelemetryReporter:
    """Posts telemetry for one engine and one recipe (see the module's docstring).

    `gzip` (on by default) compresses each body (`Content-Encoding: gzip`, which the server reads
    bounded after decompression); turn it off for a server older than that. `validate` checks each record against `helios_client.records`
    in `add`, raising ValueError naming the field (a bug in the engine's mapping), so a bad record
    never costs a whole batch at the server.
    """

    def __init__(
        self,
        base_url: str,
        recipe: str,
        token: str,
        engine: str,
        *,
        session: str | None = None,
        batch_records: int = 1_000,
        interval_s: float = 0.5,
        max_queued_records: int = 100_000,
        gzip: bool = True,
        boot: int | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        timeout_s: float = 30.0,
        validate: bool = True,
        flush_on_exit: bool = True,
        spool: str | os.PathLike[str] | None = None,
    ) -> None:
        if not 0 < batch_records <= MAX_RECORDS:
            raise ValueError(f"batch_records must be 1 to {MAX_RECORDS}")
        self.path = f"/api/recipes/{urllib.parse.quote(recipe, safe='')}/telemetry/"
        self._http = Connection(base_url, token)  # used by the sender thread only
        self.engine, self.boot = engine, boot
        self.session = session or str(uuid.uuid4())
        self.batch_records, self.interval_s, self.max_queued = batch_records, interval_s, max_queued_records
        self.gzip, self.backoff, self.timeout_s, self.validate = gzip, backoff, timeout_s, validate
        self.stats = ReporterStats()
        self._cond = threading.Condition()
        self._open: list[dict[str, Any]] = []
        self._open_since = 0.0
        self._sealed: deque[_Sealed] = deque()
        self._next = 1
        self._spool = None if spool is None else Path(spool)
        if self._spool is not None:
            self._spool.mkdir(parents=True, exist_ok=True)
            self._sealed.extend(self._resume())
        self._closing = False
        self._abandon = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"helios-telemetry-{engine}")
        self._thread.start()
        self._at_exit = flush_on_exit
        if flush_on_exit:
            atexit.register(self.close)

    @property
    def next_batch(self) -> int:
        """The number the next sealed batch will carry (batches so far + 1)."""
        return self._next

    def add(self, record: LaunchRecord | RequestRecord | dict[str, Any]) -> bool:
        """Queue one record; False when it was dropped (the memory bound was reached)."""
        data = record if isinstance(record, dict) else record.to_dict()
        if self.validate:
            problem = record_problem(data)
            if problem is not None:
                raise ValueError(f"telemetry record field {problem[0] or 'record'!r} {problem[1]}")
        with self._cond:
            if self._closing:
                raise RuntimeError("this reporter is closed")
            if self.stats.queued_records >= self.max_queued:
                self.stats.dropped_records += 1
                return False
            if self._open and self._open[0]["version"] != data["version"]:
                self._seal()
            if not self._open:
                self._open_since = time.monotonic()
                self._cond.notify_all()  # the sender now waits for this batch's interval
            self._open.append(data)
            self.stats.queued_records += 1
            if len(self._open) >= self.batch_records:
                self._seal()
        return True

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Seal what is queued and wait until every batch is posted (or refused); False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            if self._open:
                self._seal()
            while self._sealed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout_s: float = 30.0) -> None:
        """Post what is left (for up to `timeout_s`), then stop; what could not be posted is dropped."""
        with self._cond:
            if self._closing and not self._thread.is_alive():
                return
        done = self.flush(timeout_s)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if not done:
            self._abandon.set()
        self._thread.join(5.0)
        with self._cond:
            if self._spool is not None:
                for batch in self._sealed:
                    self._write_spool(batch)
                    self.stats.spooled_batches += 1
                if self._sealed:
                    log.warning("telemetry: %d batches not posted at close, kept in %s", len(self._sealed), self._spool)
            else:
                self.stats.dropped_records += self.stats.queued_records
                if self.stats.queued_records:
                    log.error("telemetry: %d records not posted at close", self.stats.queued_records)
            self.stats.queued_records = 0
            self._sealed.clear()
        if self._at_exit:
            atexit.unregister(self.close)
            self._at_exit = False

    def __enter__(self) -> TelemetryReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _seal(self) -> None:
        """Close the open batch under the next number (the lock is held)."""
        self._sealed.append(_Sealed(self.session, self._next, self.boot, self._open))
        self._next += 1
        self._open = []
        self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._sealed:
                    if self._closing:
                        self._http.close()
                        return
                    if self._open and time.monotonic() - self._open_since >= self.interval_s:
                        self._seal()
                        continue
                    wait = self.interval_s - (time.monotonic() - self._open_since) if self._open else None
                    self._cond.wait(wait)
                batch = self._sealed[0]
            self._keep()
            if not self._post(batch):
                self._http.close()
                return  # abandoned by `close`: its records count as dropped there
            with self._cond:
                if self._sealed and self._sealed[0] is batch:
                    self._sealed.popleft()
                    self.stats.queued_records -= len(batch.records)
                self._cond.notify_all()
            if batch.spooled and self._spool is not None:
                (self._spool / batch.file_name).unlink(missing_ok=True)

    def _post(self, batch: _Sealed) -> bool:
        """Post one batch until the server answers it (stored, a retry, or refused): True; False
        when `close` gave up first."""
        body = {"engine": self.engine, **batch.body()}
        data = json.dumps(body, allow_nan=False, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json"}
        if self.gzip:
            data = gzip.compress(data, compresslevel=5)
            headers["Content-Encoding"] = "gzip"
        attempt = 0
        while not self._abandon.is_set():
            try:
                answer = self._http.request(self.path, timeout_s=self.timeout_s, data=data, headers=headers)
            except ApiError as exc:
                if not exc.retryable:
                    self.stats.refused_batches += 1
                    log.error("telemetry batch %d (session %s) refused: %s", batch.number, self.session, exc)
                    return True
            except OSError as exc:
                log.warning("telemetry batch %d not posted (%s); retrying", batch.number, exc)
            else:
                if b'"upgrade"' in answer.body and not self.stats.upgrade:  # logged once
                    self.stats.upgrade = json.loads(answer.body)["upgrade"]["why"]
                    log.warning("telemetry: upgrade helios_client: %s", self.stats.upgrade)
                self.stats.posted_batches += 1
                self.stats.posted_records += len(batch.records)
                return True
            self.stats.retried_posts += 1
            deadline = time.monotonic() + self.backoff.delay(attempt)
            while not self._abandon.is_set() and (left := deadline - time.monotonic()) > 0:
                self._keep()  # while the server is away, what comes in is still sealed and spooled
                self._abandon.wait(min(left, self.interval_s))
            attempt += 1
        return False

    def _keep(self) -> None:
        """Seal the open batch once its interval has passed, and spool every sealed batch not yet
        spooled: a crash then loses at most the open batch, even while a post is being retried."""
        with self._cond:
            if self._open and time.monotonic() - self._open_since >= self.interval_s:
                self._seal()
            unspooled = [b for b in self._sealed if not b.spooled] if self._spool is not None else []
        for batch in unspooled:
            self._write_spool(batch)

    def _write_spool(self, batch: _Sealed) -> None:
        """Keep `batch` on disk (written whole, then renamed, so a crash leaves no half batch)."""
        assert self._spool is not None
        path = self._spool / batch.file_name
        part = path.with_suffix(".part")
        part.write_text(json.dumps(batch.body(), allow_nan=False, separators=(",", ":")))
        os.replace(part, path)
        batch.spooled = True

    def _resume(self) -> list[_Sealed]:
        """The batches a previous reporter left in the spool, oldest first; a file that is not a
        batch is set aside (renamed `.bad`) and logged, never posted."""
        assert self._spool is not None
        found: list[tuple[float, _Sealed]] = []
        for path in self._spool.glob("*.json"):
            try:
                written = path.stat().st_mtime
                body = json.loads(path.read_text())
                batch = _Sealed(body["session"], int(body["batch"]), body.get("boot"), list(body["records"]), True)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("telemetry spool: %s is not a batch (%s); set aside", path, exc)
                path.replace(path.with_suffix(".bad"))
                continue
            if path.name != batch.file_name:
                path.replace(self._spool / batch.file_name)
            found.append((written, batch))
        found.sort(key=lambda item: (item[0], item[1].session, item[1].number))
        self.stats.resumed_batches = len(found)
        self.stats.queued_records = sum(len(b.records) for _, b in found)
        return [batch for _, batch in found]
