"""What `heliosweb.server.daphne_tuning` changes in daphne's libraries, checked by behaviour (each test fails
if an upgrade of Twisted or autobahn undid its change; the library code each leans on is checked in
`test_server_internals.py`). The read timeouts and body bounds are checked through a real daphne in
`test_http_server.py`."""

from __future__ import annotations

import json
from io import BytesIO
from types import SimpleNamespace
from typing import Any

import autobahn.util
import pytest
from daphne.http_protocol import HTTPFactory, WebRequest
from django.conf import settings
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.web.http import HTTPChannel, Request

import heliosweb.asgi  # noqa: F401  (loading it applies the tuning, as in daphne)
from heliosweb.server.daphne_tuning import BoundedHTTPChannel

SEEN: list[tuple[Any, dict[bytes, list[bytes]], bytes]] = []


class Seen(WebRequest):
    """daphne's request as Twisted hands it over, recorded instead of sent to the application."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        Request.__init__(self, *args, **kwargs)  # not daphne's own: no server to register with

    def process(self) -> None:
        SEEN.append((self.content, dict(self.args), self.content.read()))


def serve(data: bytes) -> tuple[Any, StringTransport]:
    """`data` through a fresh channel as daphne builds it; what the request saw and what was answered."""
    SEEN.clear()
    channel = HTTPFactory.protocol()
    channel.requestFactory = Seen
    channel.callLater = Clock().callLater
    transport = StringTransport()
    channel.makeConnection(transport)
    channel.dataReceived(data)
    return (SEEN[0] if SEEN else None), transport


def post(body: bytes, content_type: bytes = b"application/json") -> bytes:
    return b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        content_type,
        len(body),
        body,
    )


def test_daphne_builds_the_bounded_channel():
    assert HTTPFactory.protocol is BoundedHTTPChannel and issubclass(BoundedHTTPChannel, HTTPChannel)


@pytest.mark.parametrize("size", [180_000, settings.DATA_UPLOAD_MAX_MEMORY_SIZE])
def test_a_body_up_to_djangos_limit_reaches_daphne_in_memory_whole(size):
    seen, _ = serve(post(b"x" * size))
    assert seen is not None
    content, _, body = seen
    assert isinstance(content, BytesIO) and len(body) == size  # Twisted alone spools >= 100,000 bytes to a file


def test_form_bodies_are_left_to_django_even_a_multipart_one_twisted_cannot_parse():
    seen, transport = serve(post(b"a=1&b=2", b"application/x-www-form-urlencoded"))
    assert seen is not None and seen[1] == {} and seen[2] == b"a=1&b=2"
    seen, transport = serve(post(b"--x\r\n", b"multipart/form-data"))  # no boundary
    assert seen is not None and seen[2] == b"--x\r\n"
    assert transport.value() == b""  # Twisted would have written its bare "400 Bad Request" here


def test_a_declared_length_over_the_limit_is_refused_before_any_body_is_read():
    _, transport = serve(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 18446744073709551616\r\n\r\n{")
    assert transport.value().startswith(b"HTTP/1.1 413 ") and b'"field": "body"' in transport.value()
    assert SEEN == [] and transport.disconnecting


def test_autobahn_writes_its_debug_lines_without_colour_codes():
    assert autobahn.util.hl("frame sent", bold=True, color="red") == "frame sent"


def test_twisted_formats_no_access_line_per_request():
    written: list[str] = []
    factory = HTTPFactory.__new__(HTTPFactory)  # daphne's, as the tuning left it (no server needed)
    factory._logFile = SimpleNamespace(write=written.append)
    channel = HTTPChannel()
    channel.makeConnection(StringTransport())
    factory.log(Request(channel))
    assert written == []  # Twisted's own would have written the request's combined-log line


@pytest.mark.parametrize(
    ("request_text", "status", "field"),
    [
        (b"GET /api/jobs/?q=" + b"x" * 32_000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414, "url"),
        (b"GET /api/jobs/?q=" + b"x" * 20_000, 414, "url"),  # the line still arriving: answered as it passes the bound
        (b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + b"y" * 70_000 + b"\r\n\r\n", 431, "headers"),
        (
            b"GET / HTTP/1.1\r\nHost: t\r\n" + b"X-A: " + b"z" * 9_000 + b"\r\nX-B: " + b"z" * 9_000 + b"\r\n\r\n",
            431,
            "headers",
        ),
    ],
    ids=["32,000-character query", "a request line still arriving", "a 70 KB header", "headers 18 KB in all"],
)
def test_an_oversized_request_line_or_header_is_answered_not_dropped(request_text, status, field):
    seen, transport = serve(request_text)
    answer = transport.value()
    assert seen is None and answer.startswith(b"HTTP/1.1 %d " % status), answer[:200]
    head, body = answer.split(b"\r\n\r\n", 1)
    assert b"Content-Type: application/json" in head and json.loads(body)["field"] == field
    assert transport.disconnecting
