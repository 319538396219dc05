"""What `heliosweb.server_tuning` switches in daphne's libraries when the ASGI application loads."""

from __future__ import annotations

from io import BytesIO
from types import SimpleNamespace

import autobahn.util
from daphne.http_protocol import WebRequest
from django.conf import settings

import heliosweb.asgi  # noqa: F401  (loading it applies the tuning, as in daphne)


def test_request_bodies_up_to_djangos_limit_stay_in_memory_and_larger_ones_go_to_a_file():
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    request = SimpleNamespace()
    for length, in_memory in ((180_000, True), (limit, True), (limit + 1, False), (None, False)):
        WebRequest.gotLength(request, length)
        assert isinstance(request.content, BytesIO) is in_memory, length
        request.content.close()


def test_autobahn_does_not_colour_its_debug_lines():
    assert autobahn.util._HAS_CLICK is False
