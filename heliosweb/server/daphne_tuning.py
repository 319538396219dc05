"""What daphne's libraries (Twisted for HTTP, autobahn for websockets) are told when the ASGI
application loads (`heliosweb.asgi`), through hooks they do not promise to keep: `requirements.txt`
pins both, `tests/heliosweb/test_server_internals.py` fails when an upgrade moves what a change
leans on, and `test_server_tuning.py` and `test_http_server.py` check each behaviour.

- Slow clients time out (Twisted's only clock, a 60 s idle timeout every byte resets, let one byte a
  second hold a request for ever): the line and headers within `HELIOS_HTTP_HEADER_TIMEOUT` s of
  the first byte, the body within `HELIOS_HTTP_BODY_TIMEOUT` plus 1 s per
  `HELIOS_HTTP_BODY_MIN_RATE` bytes, else 408 and close; the clocks stop once the request is read.
- An oversized request line is answered 414, a header line or all headers 431, in the API's error
  shape (Twisted dropped the connection, or wrote a bare `400`, past 16,384 bytes).
- A body over `DATA_UPLOAD_MAX_MEMORY_SIZE` is 413 before it is read (declared) or as it passes the
  bound (chunked), and bodies stay in memory: Twisted spooled any size to a temporary file, ~5 ms of
  a 1,000-record telemetry batch.
- Form bodies are parsed by Django only (Twisted answered a multipart body without a boundary with a
  bare `400` before Django could answer as the API documents).
- autobahn's debug lines go without click's colours (its own fallback): styling them cost ~18 µs of
  a ~75 µs frame send, before the logger dropped them.
- No access line: Twisted formatted one per request for a log daphne sends nowhere by default, ~5 %
  of the process's time answering 1,000 long-polling engines.
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
        """The body bound of this request's path: its HELIOS_LARGE_BODIES entry, else DATA_UPLOAD_MAX_MEMORY_SIZE."""
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
