"""Small typed checks shared by catalogs, requests and analysis parameters."""

from __future__ import annotations

import math
from typing import Any

from .errors import InvalidInput


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
