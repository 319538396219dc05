"""Reading what a URL's query string says, leniently: a page or a stream falls back to its default."""

from __future__ import annotations


def int_or_none(text: str | None) -> int | None:
    """The integer `text` spells, or None when it is absent or not an integer."""
    try:
        return int(text) if text else None
    except ValueError:
        return None
