"""A figure's text alternative: one short sentence of what it draws, read from the figure itself.

Every figure gets one (screen readers, and anyone whose chart did not load): its series with their
point counts and the range each axis spans. A kind may say more with `Figure(summary=...)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Real
from typing import Any

MAX_SERIES = 6  # named in full; more are counted


def _number(value: Real) -> str:
    return f"{float(value):.4g}"


def _span(values: Sequence[Any]) -> str | None:
    values = [v for v in values if v is not None]  # a gap between a line's segments, not a value
    numbers = [v for v in values if isinstance(v, Real) and not isinstance(v, bool)]
    if numbers and len(numbers) == len(values):
        low, high = min(numbers), max(numbers)
        return _number(low) if low == high else f"{_number(low)} to {_number(high)}"
    labels = list(dict.fromkeys(str(v) for v in values))
    if not labels:
        return None
    return labels[0] if len(labels) == 1 else f"{len(labels)} categories ({labels[0]} … {labels[-1]})"


def _axis_title(layout: dict[str, Any], name: str) -> str:
    title = (layout.get(name) or {}).get("title") or {}
    text = title.get("text") if isinstance(title, dict) else title
    return str(text) if text else name[0]


def _points(trace: dict[str, Any]) -> Sequence[Any]:
    values = trace.get("x")
    return values if values is not None else trace.get("y") or ()


def describe(data: Sequence[dict[str, Any]], layout: dict[str, Any]) -> str:
    """'2 series: cost (12 points), rule (12 points); prompt tokens: 100 to 6000; TTFT (ms): 3.2 to 90.'"""
    series = [
        t for t in data if t.get("visible", True) is not False and (t.get("x") is not None or t.get("y") is not None)
    ]
    if not series:
        texts = [a.get("text") for a in layout.get("annotations") or () if a.get("text")]
        return " ".join(str(t) for t in texts) or "Nothing to draw yet."
    named = [f"{t.get('name') or t.get('type', 'trace')} ({len(_points(t))} points)" for t in series]
    shown = ", ".join(named[:MAX_SERIES]) + (f" and {len(named) - MAX_SERIES} more" if len(named) > MAX_SERIES else "")
    parts = [f"{len(series)} series: {shown}"]
    primary = [
        t for t in series if t.get("xaxis", "x") == "x" and t.get("yaxis", "y") == "y"
    ]  # a subplot's axes differ
    for axis in ("x", "y"):
        values = [v for t in primary if t.get(axis) is not None for v in t[axis]]
        span = _span(values)
        if span:
            parts.append(f"{_axis_title(layout, axis + 'axis')}: {span}")
    return "; ".join(parts) + "."
