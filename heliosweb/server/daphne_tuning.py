"""What daphne's own libraries (Twisted for HTTP, autobahn for websockets) are told when the ASGI
application loads (`heliosweb.asgi`), in the web server's process. Each change reaches into a
library through a hook it does not promise to keep, so `requirements.txt` pins both libraries,
`tests/heliosweb/test_server_internals.py` fails when an upgrade changes the library code a change
leans on, and `test_server_tuning.py` and `test_http_server.py` (a real daphne) check each behaviour.

- Slow clients are timed out. Twisted's only clock is an idle timeout (60 s) that every byte
  resets, so a client sending one byte a second held a connection, and its request, for ever.
  Here a request's line and headers must arrive within `HELIOS_HTTP_HEADER_TIMEOUT` seconds (10)
  of its first byte, and its body within `HELIOS_HTTP_BODY_TIMEOUT` (20) plus one second for each
  `HELIOS_HTTP_BODY_MIN_RATE` bytes (10,000) received; past either, 408 and the connection is
  closed. The clocks stop once the request is read: a long-poll waiting 25 s for its answer, or
  a websocket (whose upgrade request has no body), is never timed out by them.
- An oversized request line or header is answered: Twisted read each line up to 16,384 bytes and
  the line and headers together up to 16,384, and past either dropped the connection with no
  answer (a 32,000-character query) or wrote a bare `400`. Here a request line past the bound is
  answered 414, a header line or all headers past it 431, in the API's error shape, then closed.
- Bodies are bounded before they are read: a declared `Content-Length` over
  `DATA_UPLOAD_MAX_MEMORY_SIZE` (5 MB + 64 KB; `18446744073709551616` included) is answered 413 at
  once, and a chunked body is cut off with 413 as it passes that size. Twisted would have written
  any of them to a temporary file first, however large.
- Bodies stay in memory. Twisted writes every body of 100,000 bytes or more to a new temporary
  file before the application sees it: creating, writing, reading back and closing it took ~5 ms
  of a 1,000-record telemetry batch (~180 KB). Every body admitted is at most the size above.
- Form bodies are parsed by Django only. Twisted parsed every POST body of a form type into
  arguments daphne never reads, and answered a multipart body it could not parse (no boundary)
  with a bare `400` with no headers and no body, before Django saw it; Django answers it as the
  API documents (415, or 400 naming the content type, in JSON, with the security headers).
- autobahn styles the arguments of a debug line with click's ANSI colours on every websocket
  frame it sends, before the logger drops the line (debug is off): ~18 µs of a ~75 µs send, the
  largest single cost of a frame to 500 viewers. Without colours (its own fallback when click is
  missing) the same lines read as plain text in any log they do reach.
- Twisted writes no access line. Its HTTP factory formatted one for every request (the combined
  log format: a date, the headers escaped) and wrote it to Twisted's log, which daphne sends
  nowhere at its default verbosity (and at `-v 2` beside its own access log, `--access-log`):
  ~5 % of the web process's time answering 1,000 long-polling engines at once.
"""

from __future__ import annotations

import json
import time
from io import BytesIO
from typing import Any, cast

import autobahn.util
from daphne.http_protocol import HTTPFactory, WebRequest
from django.conf import settings
from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure
from twisted.web.http import HTTPChannel, Request


def apply() -> None:
    """Make the changes above (the hooks they use: tests/heliosweb/test_server_internals.py)."""
    autobahn.util._HAS_CLICK = False
    HTTPFactory.log = _no_access_line
    WebRequest.gotLength = _body_in_memory
    HTTPFactory.protocol = BoundedHTTPChannel  # daphne builds each connection's channel from it


def _no_access_line(self: HTTPFactory, request: Request) -> None:
    """`HTTPFactory.log`, after each request: nothing (see the module's docstring)."""


def _body_in_memory(self: WebRequest, length: int | None) -> None:
    """`Request.gotLength`, once the headers are in: the body goes to memory (at most
    DATA_UPLOAD_MAX_MEMORY_SIZE, or a path's own bound in HELIOS_LARGE_BODIES: the channel refuses
    more), and Twisted leaves forms to Django (what
    its `parsePOSTFormSubmission=False` does, which daphne gives no way to pass)."""
    self.content = BytesIO()
    self._parsePOSTFormSubmission = False


class BoundedHTTPChannel(HTTPChannel):
    """Twisted's HTTP/1.1 channel with read deadlines and a body size bound (the module's docstring).
    It replaces daphne's `_GenericHTTPChannelProtocol` wrapper, which only matters for HTTP/2
    negotiated over TLS, and daphne here serves plain TCP behind the proxy that terminates TLS."""

    _clock: Any = None  # the pending timer while a request is being read
    _deadline = 0.0
    _part = ""
    _closing = False
    _body_limit = 0

    def dataReceived(self, data: bytes) -> None:
        if self._clock is None and not self._handlingRequest and not self._closing:
            self._arm("headers", settings.HELIOS_HTTP_HEADER_TIMEOUT)
        super().dataReceived(data)

    def _limit(self) -> int:
        """The body bound of this request's path: DATA_UPLOAD_MAX_MEMORY_SIZE, or its own where
        HELIOS_LARGE_BODIES names a prefix of it (a trace upload)."""
        raw: Any = getattr(self, "_path", b"")  # the request line's target, set with the headers
        path = raw.decode("latin-1").split("?", 1)[0] if isinstance(raw, bytes) else ""
        for prefix, limit in settings.HELIOS_LARGE_BODIES.items():
            if path.startswith(prefix):
                return int(limit)
        return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)

    def lineReceived(self, line: bytes) -> None:
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            self.lineLengthExceeded(line)
            return
        super().lineReceived(line)

    def lineLengthExceeded(self, line: bytes) -> None:
        """A line past MAX_LENGTH, or the headers past totalHeadersSize: 414 while the request line
        is being read (Twisted's `__first_line` is set until it is), else 431."""
        if self._closing:
            return
        if getattr(self, "_HTTPChannel__first_line", 0):
            self._refuse(414, "url", f"url: the request line is longer than {self.MAX_LENGTH:,} bytes")
        else:
            self._refuse(431, "headers", f"headers: longer than {self.totalHeadersSize:,} bytes")

    def allHeadersReceived(self) -> None:
        self._disarm()
        limit = self._body_limit = self._limit()  # the path read with the headers, once
        if self.length is not None and self.length > limit:
            self._refuse(413, "body", f"body: is {self.length:,} bytes, over {limit:,}")
            return
        super().allHeadersReceived()
        if self.length != 0:
            self._arm("body", settings.HELIOS_HTTP_BODY_TIMEOUT)

    def rawDataReceived(self, data: bytes) -> None:
        if self._closing:
            return
        reading_body = self._clock is not None and not self._handlingRequest
        super().rawDataReceived(data)
        if not reading_body or self._closing:
            return
        self._deadline += len(data) / settings.HELIOS_HTTP_BODY_MIN_RATE
        limit = self._body_limit
        content = getattr(self.requests[-1], "content", None) if self.requests else None
        if content is not None and not content.closed and content.tell() > limit:
            self._refuse(413, "body", f"body: is over {limit:,} bytes")

    def allContentReceived(self) -> None:
        self._disarm()
        super().allContentReceived()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._disarm()
        super().connectionLost(reason)

    def _arm(self, part: str, seconds: float) -> None:
        self._part, self._deadline = part, time.monotonic() + seconds
        self._clock = self.callLater(seconds, self._check)

    def _disarm(self) -> None:
        if self._clock is not None and self._clock.active():
            self._clock.cancel()
        self._clock = None

    def _check(self) -> None:
        left = self._deadline - time.monotonic()
        if left > 0:  # the body kept its rate: the deadline moved on
            self._clock = self.callLater(left, self._check)
            return
        self._clock = None
        limits = {
            "headers": f"within {settings.HELIOS_HTTP_HEADER_TIMEOUT} s",
            "body": f"within {settings.HELIOS_HTTP_BODY_TIMEOUT} s plus 1 s per "
            f"{settings.HELIOS_HTTP_BODY_MIN_RATE:,} bytes",
        }
        self._refuse(408, self._part, f"the request's {self._part} did not arrive {limits[self._part]}")

    def _refuse(self, status: int, field: str, message: str) -> None:
        """Answer `status` with the API's error shape, then close: nothing more is read."""
        self._disarm()
        self._closing = True
        body = json.dumps({"error": message, "field": field}).encode()
        reason = {
            408: b"Request Timeout",
            413: b"Content Too Large",
            414: b"URI Too Long",
            431: b"Request Header Fields Too Large",
        }[status]
        cast(Any, self.transport).write(
            b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n%s" % (status, reason, len(body), body)
        )
        self.loseConnection()
