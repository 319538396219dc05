"""The API's one body parser: JSON, read with bounds. DRF's JSONParser reads a body of any size
(Django's DATA_UPLOAD_MAX_MEMORY_SIZE guards only `request.body` and forms) into `json`, which
recursed into a 500 on 100,000 `[`. Here an oversized body is 413, and `bounds.parse_json` refuses
deep nesting and unrepresentable numbers naming where they are (400).
"""

from __future__ import annotations

from typing import IO, Any

from django.conf import settings
from rest_framework.parsers import JSONParser

from .bounds import parse_json
from .errors import TooLarge


def read_bounded(stream: IO[bytes] | None) -> bytes:
    """At most DATA_UPLOAD_MAX_MEMORY_SIZE bytes of `stream`, or TooLarge naming the body."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    data = stream.read(limit + 1) if stream is not None else b""
    if len(data) > limit:
        raise TooLarge("body", f"is over {limit:,} bytes")
    return data


class BoundedJSONParser(JSONParser):
    def parse(self, stream: IO[bytes] | None, media_type: str | None = None, parser_context: Any = None) -> Any:
        return parse_json(read_bounded(stream))
