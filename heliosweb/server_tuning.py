"""Two settings of daphne's own libraries that cost the product's hot paths time, switched once when
the ASGI application is loaded (`heliosweb.asgi`), in the web server's process.

- autobahn (daphne's websockets) styles the arguments of a debug line with click's ANSI colours on
  every frame it sends, before the logger drops the line (debug is off): ~18 µs of a ~75 µs send,
  the largest single cost of a frame to 500 viewers. Without colours (its own fallback when click
  is missing) the same lines read as plain text in any log they do reach.
- Twisted (daphne's HTTP) writes every request body of 100,000 bytes or more to a new temporary
  file before the application sees it: creating, writing, reading back and closing it took ~5 ms
  of a 1,000-record telemetry batch (~180 KB). Bodies up to DATA_UPLOAD_MAX_MEMORY_SIZE, which
  Django holds in memory anyway, stay in memory; larger or unsized ones still go to a file.
"""

from __future__ import annotations

from io import BytesIO

import autobahn.util
from daphne.http_protocol import WebRequest
from django.conf import settings
from twisted.web.http import Request


def apply() -> None:
    autobahn.util._HAS_CLICK = False
    WebRequest.gotLength = _body_in_memory_up_to_django_limit


def _body_in_memory_up_to_django_limit(self: WebRequest, length: int | None) -> None:
    if length is not None and length <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        self.content = BytesIO()
    else:
        Request.gotLength(self, length)
