"""Small typed checks shared by catalogs, requests and analysis parameters."""

from __future__ import annotations

import math
import re
from typing import Any

from .errors import InvalidInput

# Numbers written as text (query strings, form fields, CLI flags): ASCII digits only. Python's own
# int() and float() also read "1_0", full-width and other scripts' digits, "nan" and "inf".
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def int_of_text(text: str) -> int | None:
    """`text` (stripped) as an integer written in ASCII decimal digits, or None."""
    text = text.strip()
    if not _INT_TEXT.fullmatch(text) or len(text) > 4000:  # int() refuses over 4,300 digits
        return None
    return int(text)


def number_of_text(text: str) -> float | None:
    """`text` (stripped) as a finite number written in ASCII decimal digits, or None."""
    text = text.strip()
    if not _NUMBER_TEXT.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


def require_int(value: Any, field: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (a bool is not one) inside [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be an integer, got {type(value).__name__} {value!r}")
    if minimum is not None and value < minimum:
        raise InvalidInput(field, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidInput(field, f"must be <= {maximum}, got {value}")
    return value


def require_number(value: Any, field: str, *, minimum: float | None = None, maximum: float | None = None) -> float:
    """A finite real number (int or float, not bool) inside [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(field, f"must be a number, got {type(value).__name__} {value!r}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer too large for a float (a 401-digit one)
        finite = False
    if not finite:
        shown = repr(value) if isinstance(value, float) else f"an integer of {len(str(abs(value)))} digits"
        raise InvalidInput(field, f"must be finite, got {shown}")
    if minimum is not None and value < minimum:
        raise InvalidInput(field, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidInput(field, f"must be <= {maximum}, got {value}")
    return float(value)


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored as text by every database, or None: PostgreSQL refuses a NUL
    character, and no encoding holds a lone surrogate (half of a UTF-16 pair), on any database."""
    if "\x00" in text:
        return "holds a NUL character (\\u0000)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"holds a lone surrogate (\\u{ord(text[exc.start]):04x}) at character {exc.start}"
    return None


def require_text(value: Any, field: str, *, max_length: int, required: str = "") -> str:
    """Free text (stripped) of at most `max_length` characters that every database stores as it is;
    `required`: the message when it is empty (empty allowed without one); None reads as empty."""
    text = "" if value is None else value
    if not isinstance(text, str):
        raise InvalidInput(field, f"must be text, got {type(text).__name__}")
    text = text.strip()
    if required and not text:
        raise InvalidInput(field, required)
    if len(text) > max_length:
        raise InvalidInput(field, f"at most {max_length} characters (got {len(text)})")
    problem = text_problem(text)
    if problem:
        raise InvalidInput(field, problem)
    return text


def require_list(value: Any, field: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise InvalidInput(field, f"must be a list, got {type(value).__name__}")
    return list(value)


def require_mapping(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be an object, got {type(value).__name__}")
    return value


def reject_unknown_keys(data: dict[str, Any], allowed: set[str], field: str) -> None:
    """Unknown keys are typos more often than not: name them instead of ignoring them."""
    unknown = sorted(set(data) - allowed)
    if unknown:
        prefix = f"{field}." if field else ""
        raise InvalidInput(f"{prefix}{unknown[0]}", f"unknown field (expected one of {sorted(allowed)})")
