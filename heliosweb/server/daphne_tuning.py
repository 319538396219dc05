"""What daphne's libraries (Twisted for HTTP, autobahn for websockets) are told when the ASGI
application loads (`heliosweb.asgi`). Each change uses a hook the library does not promise to keep:
`requirements.txt` pins both, `tests/heliosweb/test_server_internals.py` fails when an upgrade
changes the code a change leans on, and `test_server_tuning.py` and `test_http_server.py` check
each behaviour.

- Slow clients time out. Twisted's only clock is a 60 s idle timeout every byte resets (one byte a
  second held a request for ever). Here the line and headers must arrive within
  `HELIOS_HTTP_HEADER_TIMEOUT` s of the first byte, the body within `HELIOS_HTTP_BODY_TIMEOUT` plus
  1 s per `HELIOS_HTTP_BODY_MIN_RATE` bytes; past either, 408 and close. The clocks stop once the
  request is read (a long-poll, a websocket).
- An oversized request line or header is answered (Twisted dropped the connection silently or wrote
  a bare `400` past 16,384 bytes): a request line 414, a header line or all headers 431, in the
  API's error shape, then closed.
- Bodies are bounded before they are read: a `Content-Length` over `DATA_UPLOAD_MAX_MEMORY_SIZE`
  is 413 at once, a chunked body is cut off with 413 as it passes it (Twisted spooled any size to
  a temporary file first).
- Bodies stay in memory: Twisted's temporary file for bodies of 100,000 bytes or more took ~5 ms
  of a 1,000-record telemetry batch (~180 KB).
- Form bodies are parsed by Django only: Twisted parsed them for nothing and answered a multipart
  body without a boundary with a bare `400` before Django could answer as the API documents.
- autobahn colours its debug lines with click on every frame sent, before the logger drops them:
  ~18 µs of a ~75 µs send. Without click's colours (its own fallback) they read as plain text.
- Twisted writes no access line: its factory formatted one per request for a log daphne sends
  nowhere by default, ~5 % of the process's time answering 1,000 long-polling engines.
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
    """`Request.gotLength`: the body goes to memory (the channel bounds it), and forms to Django
    (Twisted's `parsePOSTFormSubmission=False`, which daphne gives no way to pass)."""
    self.content = BytesIO()
    self._parsePOSTFormSubmission = False


class BoundedHTTPChannel(HTTPChannel):
    """Twisted's HTTP/1.1 channel with read deadlines and a body bound, in place of daphne's wrapper
    that matters only for HTTP/2 over TLS (daphne serves plain TCP behind the TLS proxy here)."""

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
