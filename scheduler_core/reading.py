"""Reading what comes from outside, bounded: files by bytes (never past a stated size, so
`/dev/zero` named as a file is refused after a few megabytes rather than filling memory), and JSON
text by depth, read without recursion before `json` recurses once per level (RecursionError near
1,000) and without the ValueError of an integer of more than 4,300 digits: both are bad input,
named by their field. The web's bounded body reader (heliosweb.common.bounds) uses the same gate."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from .errors import InvalidInput

MAX_FILE_BYTES = 64 * 1024 * 1024  # a trace or a replay's records: the web's upload bound
MAX_JSON_FILE_BYTES = 8 * 1024 * 1024  # a catalog file (256 graphs are ~20 KB; a capture's output more)
MAX_JSON_DEPTH = 32  # nesting of any JSON the project reads (CLI input, bodies, trace rows, messages)

# The gates below read the document's UTF-8 bytes: every byte of a multi-byte character is >= 0x80,
# so quotes, backslashes, brackets and digits are what they seem. A JSON string, skipped whole
# (brackets inside it do not count); everything but brackets, and each bracket's step in depth.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_NOT_BRACKETS_OR_QUOTES = bytes(set(range(256)) - set(b'[]{}"'))
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def outside_strings(data: bytes) -> bytes:
    """`data` without its JSON strings. With no backslash in it there are no escapes, so every `"`
    opens or closes a string as json reads it, and the pieces between quotes alternate outside and
    inside: splitting is ~3x faster than the regex, which stays for text with escapes."""
    if b"\\" in data:
        return _STRING.sub(b"", data)
    return b"".join(data.split(b'"')[::2])


def brackets(data: bytes) -> bytes:
    """The document's brackets outside its strings, in order. Most documents have no bracket inside
    a string: with only quotes and brackets kept, each string is then a `""`, and once those are
    removed no quote is left (removing leftmost pairs leaves none only if the 1st and 2nd quote, the
    3rd and 4th ... were adjacent: each string's opening and closing quote, nothing between). That
    is ~4x cheaper than cutting the strings out, which stays for the other documents."""
    if b"\\" not in data:  # no escapes: every quote opens or closes a string
        kept = data.translate(None, _NOT_BRACKETS_OR_QUOTES).replace(b'""', b"")
        if b'"' not in kept:
            return kept
    return outside_strings(data).translate(None, _NOT_BRACKETS)


def too_deep(brackets: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `brackets` (a document's, outside its strings) nest more than `limit` deep (read
    without recursion, so a 1 MB telemetry batch costs well under a millisecond)."""
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > limit


def loads(text: str, field: str) -> Any:
    """`text` as JSON, or InvalidInput naming `field` (not JSON, nested deeper than MAX_JSON_DEPTH,
    an integer Python refuses to read)."""
    if too_deep(brackets(text.encode(errors="surrogatepass"))):
        raise InvalidInput(field, f"is nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(field, f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise InvalidInput(field, f"is not valid JSON: {str(exc)[:80]}") from None


def read_text(path: str, field: str, max_bytes: int = MAX_JSON_FILE_BYTES) -> str:
    """A whole (small) file as UTF-8 text, never reading more than `max_bytes` + 1 bytes."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise InvalidInput(field, f"cannot read {path!r}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise InvalidInput(field, f"{path!r} is larger than {max_bytes:,} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(field, f"{path!r} is not UTF-8 text (byte {exc.start})") from None


def read_lines(path: str, field: str, max_line: int, max_bytes: int = MAX_FILE_BYTES) -> Iterator[str]:
    """A file's lines as text, one at a time: none longer than `max_line` characters is read whole
    (a longer one is handed on cut to `max_line` + 1, for the caller to refuse by its number), and
    reading stops with InvalidInput past `max_bytes` in all."""
    read, number = 0, 0
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            while line := f.readline(max_line + 1):
                read, number = read + len(line), number + 1
                if read > max_bytes:
                    raise InvalidInput(field, f"{path!r} is larger than {max_bytes:,} characters")
                yield line
    except UnicodeDecodeError:
        raise InvalidInput(field, f"{path!r}: line {number + 1} is not UTF-8 text") from None
    except OSError as exc:
        raise InvalidInput(field, f"cannot read {path!r}: {exc.strerror}") from None
