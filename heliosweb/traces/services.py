"""Uploading a trace: bounded before it is read, stored once per sha256, parsed by scheduler_core one
at a time per process, audited. A refused upload stores nothing; racing uploads of the same bytes or
name answer the stored trace or 409, never a database error."""

from __future__ import annotations

import hashlib
import io
import re
import threading
from collections.abc import Iterator
from functools import partial
from typing import IO

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q

from heliosweb.audit.services import audit_append
from heliosweb.common.bounds import parse_json
from heliosweb.common.errors import Conflict, Throttled, TooLarge
from heliosweb.common.permissions import Actor
from scheduler_core.errors import InvalidInput
from scheduler_core.traffic import TraceError, parse_trace, summarise_trace

from . import codec
from .models import Trace

# 64 MiB: ~1.9 million Azure CSV rows (1,000,000 measured at 35.3 MB), a million ~60-byte JSON Lines
# rows; the parser's row bound (scheduler_core.traffic.MAX_TRACE_ROWS) stays tighter for short rows.
MAX_TRACE_BYTES = settings.TRACE_UPLOAD_MAX_BYTES
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_CHUNK = 1 << 20
# A parse peaks at +152 MB for a 50 MiB Azure CSV (bench/trace_upload_bench.py), ~200 MB at the bound:
# one at a time keeps the web process (which serves engines too) at one such peak; others wait, then 429.
_PARSING = threading.Lock()
PARSE_WAIT_S = 120


def check_size(size: int | None) -> None:
    """Refuse a body over MAX_TRACE_BYTES from its declared size, before a byte of it is read."""
    if size is not None and size > MAX_TRACE_BYTES:
        raise TooLarge("file", f"is {size:,} bytes, at most {MAX_TRACE_BYTES:,} allowed")


def trace_upload(*, user: Actor | None, name: str, content: bytes | IO[bytes]) -> tuple[Trace, bool]:
    """The stored trace of `content` (bytes or a binary file) and whether it was created now: the same
    bytes again answer the trace stored under its first name. TooLarge, TraceError (a bad row: line
    and column), InvalidInput (the name, an empty trace) or Conflict (the name taken by other bytes)
    store nothing. Audited: `trace_uploaded`."""
    stream = io.BytesIO(content) if isinstance(content, bytes) else content
    digest, size = _hash(stream)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        if (existing := Trace.objects.filter(sha256=digest).first()) is not None:
            return existing, False  # the bytes are what count: stored already, whatever the name
        raise InvalidInput("name", "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit")
    if (existing := _stored_as(digest, name)) is not None:
        return existing, False
    stream.seek(0)
    if not _PARSING.acquire(timeout=PARSE_WAIT_S):
        raise Throttled("file", "another trace is being read; try again in a minute", retry_after=60)
    try:
        rows = partial(parse_json, root="row")  # a JSON Lines row bounded as a request body is
        trace = parse_trace(_lines(stream), name=name, field="file", loads=rows)
        summary = summarise_trace(trace)
        packed, shapes = codec.pack(trace)
    finally:
        _PARSING.release()
    fmt, requests = trace.format, len(trace)
    try:
        with transaction.atomic():
            stored = Trace.objects.create(
                name=name,
                sha256=digest,
                format=fmt,
                size_bytes=size,
                requests=requests,
                packed=packed,
                shapes=shapes,
                summary=summary,
                created_by=user if isinstance(user, User) else None,
            )
            audit_append(
                action="trace_uploaded",
                actor=user,
                actor_name="system",
                object_type="trace",
                object_id=stored.pk,
                after={"name": name, "sha256": digest, "requests": requests, "bytes": size, "format": fmt},
            )
    except IntegrityError:  # another upload of the same bytes or name committed between the checks and now
        if (existing := _stored_as(digest, name)) is not None:
            return existing, False
        raise Conflict("file", "another upload was being stored at the same moment: try again") from None
    return stored, True


def _stored_as(digest: str, name: str) -> Trace | None:
    """The trace stored with these bytes (any name), else None; Conflict when other bytes hold `name`.
    One read of both, so the same bytes committing between two reads cannot turn a 200 into a 409."""
    rows = list(Trace.objects.filter(Q(sha256=digest) | Q(name__iexact=name)).defer("packed"))  # not the bytes
    if same := [t for t in rows if t.sha256 == digest]:
        return same[0]
    if rows:
        raise Conflict("name", f"a different trace is already stored as {name!r}")
    return None


def _hash(stream: IO[bytes]) -> tuple[str, int]:
    """sha256 and size of the stream, read in chunks and never past MAX_TRACE_BYTES + 1."""
    h, size = hashlib.sha256(), 0
    while chunk := stream.read(_CHUNK):
        size += len(chunk)
        check_size(size)
        h.update(chunk)
    return h.hexdigest(), size


def _lines(stream: IO[bytes]) -> Iterator[str]:
    """The stream's UTF-8 lines (a BOM allowed), one at a time; an undecodable one refused by number."""
    for number, raw in enumerate(stream, start=1):
        try:
            yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            raise TraceError("file", number, None, "is not UTF-8 text") from None
