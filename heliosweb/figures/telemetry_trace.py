"""An engine's launches over a time window, from its telemetry, as a Chrome/Perfetto trace: what it
really ran, next to what a job simulated. Bounded: a window of at most MAX_WINDOW_MS holding at
most MAX_LAUNCHES launches (a longer one is refused, never cut silently)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from heliosweb.common.errors import NotFound
from heliosweb.recipes.models import Recipe
from heliosweb.telemetry.selectors import raw_records
from scheduler_core.errors import InvalidInput
from scheduler_core.validation import number_of_text

from .contract import Span
from .exports import trace_of

MAX_WINDOW_MS = 10 * 60 * 1000
DEFAULT_WINDOW_MS = 60 * 1000
MAX_LAUNCHES = 50_000


def telemetry_trace(*, recipe: Recipe, query: Mapping[str, str]) -> dict[str, Any]:
    """`?since_ms=&until_ms=` (Unix ms; default the last minute), `?engine=` (default: every engine):
    a process per engine, a thread per policy version, a slice per launch (from its `t_ms`, for its
    `ms`), and an arrow through each request's launches."""
    until_ms = _unix_ms(query, "until_ms", default=time.time() * 1000)
    since_ms = _unix_ms(query, "since_ms", default=until_ms - DEFAULT_WINDOW_MS)
    if not 0 < until_ms - since_ms <= MAX_WINDOW_MS:
        raise InvalidInput("since_ms", f"the window must be longer than 0 and at most {MAX_WINDOW_MS // 1000} s")
    engine = query.get("engine") or None
    records = raw_records(recipe=recipe, since_ms=since_ms, until_ms=until_ms, engine=engine, most=MAX_LAUNCHES)
    if len(records) > MAX_LAUNCHES:
        raise InvalidInput("since_ms", f"the window holds more than {MAX_LAUNCHES} launches: narrow it")
    if not records:
        who = f"engine {engine!r}" if engine else "any engine"
        raise NotFound("since_ms", f"no launch of {who} on {recipe.name!r} in that window (raw telemetry is kept 24 h)")
    trace = trace_of(_span(name, r, since_ms) for name, r in records)
    trace["otherData"] = {"recipe": recipe.name, "since_ms": since_ms, "until_ms": until_ms}
    return trace


def _span(engine: str, launch: dict[str, Any], since_ms: float) -> Span:
    return Span(
        engine,
        f"v{launch['version']} {launch['policy']}",
        f"prefill {launch['graph']}",
        launch["t_ms"] - since_ms,
        launch["ms"],
        {
            "request": launch["request"],
            "graph": launch["graph"],
            "tokens": [launch["start"], launch["end"]],
            "padded": launch["padded"],
            "chooser": launch["chooser"],
            "t_ms": launch["t_ms"],
        },
        flow=launch["request"],
    )


def _unix_ms(query: Mapping[str, str], name: str, *, default: float) -> float:
    raw = query.get(name)
    if raw in (None, ""):
        return default
    value = number_of_text(raw)  # ASCII digits only, as every number the API reads from text
    if value is None:
        raise InvalidInput(name, f"must be Unix time in milliseconds, got {raw!r}")
    if not 1e12 <= value <= 1e14:  # 2001 .. 5138: seconds sent as milliseconds fail here
        raise InvalidInput(name, f"must be Unix time in milliseconds (13 digits today), got {raw!r}")
    return value
