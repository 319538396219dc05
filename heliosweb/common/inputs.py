"""Integers and ids from outside (query strings, URL parts, JSON bodies, form fields): one parser,
bounded to what the database stores, so `?decision=99999999999999999999` is refused naming its
field (or not found) instead of overflowing the database driver (500).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from django.db.models import Model, QuerySet

from scheduler_core.errors import InvalidInput
from scheduler_core.validation import int_of_text

from .bounds import DB_INT_MAX
from .errors import NotFound

DB_INT_MIN = -DB_INT_MAX - 1  # a 64-bit integer column (BigAutoField keys, SQLite's integers)

M = TypeVar("M", bound=Model)


def as_int(value: object) -> int | None:
    """`value` as an int: an int (no bool), an integral float, or ASCII decimal digits (no "1_0"); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        return int_of_text(value)
    return None


def parse_int(value: object, *, field: str, minimum: int = DB_INT_MIN, maximum: int = DB_INT_MAX) -> int:
    """`value` as an int within [minimum, maximum], or InvalidInput naming `field`."""
    number = as_int(value)
    if number is None:
        raise InvalidInput(field, f"must be an integer, got {value!r:.60}")
    if not minimum <= number <= maximum:
        raise InvalidInput(field, f"must be from {minimum} to {maximum}, got {number}")
    return number


def int_or_none(value: object, *, minimum: int = DB_INT_MIN, maximum: int = DB_INT_MAX) -> int | None:
    """Lenient `parse_int` for a page or a stream that falls back to its default: None when absent or bad."""
    number = as_int(value)
    return number if number is not None and minimum <= number <= maximum else None


def query_int(
    params: Mapping[str, str], name: str, *, default: int, minimum: int = DB_INT_MIN, maximum: int = DB_INT_MAX
) -> int:
    """A query-string integer: `default` when absent, else `parse_int` naming `name` (`?after=` is refused)."""
    raw = params.get(name)
    return default if raw is None else parse_int(raw, field=name, minimum=minimum, maximum=maximum)


def query_limit(params: Mapping[str, str], *, default: int, most: int) -> int:
    """`?limit=`: a positive integer (or InvalidInput), at most `most` (larger ones read as `most`)."""
    raw = params.get("limit")
    if raw is None:
        return default
    number = as_int(raw)
    if number is None:
        raise InvalidInput("limit", f"must be an integer, got {raw[:40]!r}")
    if number < 1:
        raise InvalidInput("limit", f"must be at least 1, got {number}")
    return min(most, number)


def json_id(value: object, *, field: str, what: str) -> int:
    """A row's id in a JSON body: an integer (not its text, a float or a bool) a key can hold."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= DB_INT_MAX:
        raise InvalidInput(field, f"not a {what} id (a positive integer): {value!r}"[:200])
    return value


def parse_id(value: object, *, field: str, what: str) -> int:
    """A row's id: a positive integer a key can hold, or InvalidInput "not a <what> id" naming `field`."""
    number = as_int(value)
    if number is None or not 1 <= number <= DB_INT_MAX:
        raise InvalidInput(field, f"not a {what} id: {value!r:.60}")
    return number


def get_by_id(queryset: QuerySet[M], value: object, *, what: str, field: str = "id") -> M:
    """One row by an id from outside: not an integer is bad input (400), an id no row has NotFound (404)."""
    number = as_int(value)
    if number is None:
        raise InvalidInput(field, f"not a {what} id: {value!r:.60}")
    found = queryset.filter(pk=number).first() if 1 <= number <= DB_INT_MAX else None
    if found is None:
        raise NotFound(field, f"no {what} {number}")
    return found
