"""Request bodies sent with `Content-Encoding: gzip` are read decompressed, bounded.

Engines compress large posts (1,000 launch records: ~180 KB of JSON, ~10 KB gzipped); Django reads
bodies as sent (a gzip body answered 400 `must be UTF-8`). Before anything reads the body (the CSRF
check reads forms) it is replaced by its decompressed bytes, stopping one byte past
`DATA_UPLOAD_MAX_MEMORY_SIZE` (a gzip bomb costs at most that: 413); not gzip, 400; an encoding
other than gzip or identity, 415.
"""

from __future__ import annotations

import io
import zlib

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from heliosweb.common.gate import gate


def _decode(request: HttpRequest) -> JsonResponse | None:
    """Replace a gzip body by its decompressed bytes; the refusal when it cannot be."""
    encoding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding not in ("gzip", "x-gzip"):
        return _refuse(415, "content_encoding", f"request bodies may be sent as gzip or identity, not {encoding!r}")
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    compressed = request.read(limit + 1)
    if len(compressed) > limit:
        return _refuse(413, "body", f"is over {limit:,} bytes")
    try:
        body = gunzip(compressed, limit)
    except ValueError as exc:
        return _refuse(413 if isinstance(exc, TooLargeDecompressed) else 400, "body", str(exc))
    request._stream = io.BytesIO(body)  # what request.read() reads
    request._read_started = False  # type: ignore[attr-defined]
    request.META["CONTENT_LENGTH"] = str(len(body))
    del request.META["HTTP_CONTENT_ENCODING"]
    return None


class TooLargeDecompressed(ValueError):
    pass


def gunzip(data: bytes, limit: int) -> bytes:
    """`data` (one or more gzip members) decompressed, or ValueError; TooLargeDecompressed as soon
    as the output would pass `limit` bytes (nothing past it is ever produced)."""
    out = bytearray()
    while data:
        decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out += decompressor.decompress(data, limit + 1 - len(out))
        except zlib.error as exc:
            raise ValueError(f"is not valid gzip ({exc})") from None
        if len(out) > limit or decompressor.unconsumed_tail:
            raise TooLargeDecompressed(f"is over {limit:,} bytes once decompressed (Content-Encoding: gzip)")
        if not decompressor.eof:
            raise ValueError("is not valid gzip (it ends early)")
        data = decompressor.unused_data
    return bytes(out)


decoded_request_body = gate(_decode)  # in MIDDLEWARE before the CSRF check


def _refuse(status: int, field: str, message: str) -> JsonResponse:
    return JsonResponse({"error": f"{field}: {message}" if field == "body" else message, "field": field}, status=status)
