"""Counterfactual replay of what a recipe's engines served: "what the other policy would have done".

`replay_submit` rebuilds the traffic engines posted over a window
(`scheduler_core.analyses.replay.from_engine_records`) and submits a `replay` job on the recipe's
latest boot or an execution model; the job keeps the requests and their origin, so it stays
evidence after the raw batches are pruned. A window longer than the raw one, or holding none or
over `MAX_REQUESTS` finished requests, is refused and nothing is stored or queued.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from heliosweb.catalogs.models import Boot
from heliosweb.common.permissions import Actor
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.jobs.services.submission import job_create
from heliosweb.recipes.models import Recipe
from scheduler_core.analyses import replay
from scheduler_core.analyses.params import AFFINE
from scheduler_core.errors import InvalidInput
from scheduler_core.profiles import PROFILES
from scheduler_core.validation import require_number

from .models import Totals
from .selectors import raw_records
from .validation import ENGINE_NAME

KIND = replay.ANALYSIS.name
MAX_REQUESTS = replay.MAX_REQUESTS
BOOTS = ("boot", "boot-repaired")  # the recipe's latest boot, as stored or with its flagged shapes replaced
MIN_UNIX_MS, MAX_UNIX_MS = 1e12, 1e14  # 2001 .. 5138: Unix seconds sent as milliseconds fail


def executions() -> tuple[str, ...]:
    """What a replay may run on: the recipe's boot, the affine model, or a shipped GPU profile."""
    return (*BOOTS, AFFINE, *PROFILES)


def replay_submit(
    *,
    recipe: Recipe,
    since_ms: Any,
    until_ms: Any,
    engine: Any = None,
    execution: Any = "boot",
    user: Actor | None = None,
) -> BenchmarkJob:
    """Queue a `replay` of `recipe`'s requests that finished in [since_ms, until_ms) (Unix ms), from
    `engine` (None or "": all). InvalidInput names the field."""
    since = require_number(since_ms, "since_ms", minimum=MIN_UNIX_MS, maximum=MAX_UNIX_MS)
    until = require_number(until_ms, "until_ms", minimum=MIN_UNIX_MS, maximum=MAX_UNIX_MS)
    longest_ms = settings.HELIOS_TELEMETRY_RAW_HOURS * 3_600_000
    if not 0 < until - since <= longest_ms:
        raise InvalidInput(
            "until_ms",
            f"the window must end after it starts and span at most {longest_ms / 3_600_000:g} h (the raw window)",
        )
    if engine in (None, ""):
        engine = None
    elif not isinstance(engine, str) or not ENGINE_NAME.match(engine):
        raise InvalidInput("engine", "must be an engine's name (letters, digits, - and _; at most 64)")
    if execution not in executions():
        raise InvalidInput("execution", f"must be one of {list(executions())}, got {execution!r}")
    params: dict[str, Any] = {"execution": AFFINE} if execution in BOOTS else {"execution": execution}
    if execution in BOOTS:
        params["boot_catalog"] = {"boot": _latest_boot(recipe).pk, "repaired": execution == "boot-repaired"}
    found = raw_records(recipe=recipe, since_ms=since, until_ms=until, engine=engine, most=MAX_REQUESTS, of="request")
    if len(found) > MAX_REQUESTS:
        raise InvalidInput("since_ms", f"the window holds more than {MAX_REQUESTS:,} finished requests: narrow it")
    if not found:
        who = f"engine {engine!r}" if engine else "any engine"
        raise InvalidInput(
            "since_ms",
            f"no request of {who} finished on {recipe.name!r} in that window "
            f"(raw telemetry is kept {settings.HELIOS_TELEMETRY_RAW_HOURS:g} h)",
        )
    params["trace"], served = replay.from_engine_records([r for _, r in found], [name for name, _ in found])
    params["served"] = list(served)
    source = {
        "telemetry": recipe.name,
        "engine": engine or "all",
        "since_ms": since,
        "until_ms": until,
        "window_utc": f"{_utc(since)} to {_utc(until)}",
        "requests": len(found),
        "execution": execution,
    }
    with transaction.atomic():
        job = job_create(kind=KIND, recipe=recipe.name, params=params, user=user)
        BenchmarkJob.objects.filter(pk=job.pk).update(trace_sources={"trace": source})
        job.trace_sources = {"trace": source}
    return job


def _utc(unix_ms: float) -> str:
    return datetime.fromtimestamp(unix_ms / 1000.0, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _latest_boot(recipe: Recipe) -> Boot:
    boot = Boot.objects.filter(recipe=recipe).order_by("-created_at", "-id").first()
    if boot is None:
        raise InvalidInput("execution", f"recipe {recipe.name!r} has no stored boot; choose {AFFINE} or a profile")
    return boot


WINDOWS_MIN = (5, 15, 60)  # the live page's windows: the last this many minutes


def replay_offer(*, recipe: Recipe) -> dict[str, Any]:
    """What the live page offers: windows, engines, executions, and the latest replay with its result."""
    has_boot = Boot.objects.filter(recipe=recipe).exists()
    engines = sorted(set(Totals.objects.filter(recipe=recipe).values_list("engine", flat=True)))
    latest = BenchmarkJob.objects.filter(kind=KIND, recipe=recipe).order_by("-id").first()
    return {
        "windows": WINDOWS_MIN,
        "engines": engines,
        "executions": executions() if has_boot else tuple(x for x in executions() if x not in BOOTS),
        "latest": latest,
        "latest_rows": replay.comparison_rows(latest.result) if latest is not None and latest.result else [],
    }


def replay_window(*, recipe: Recipe, minutes: Any, **options: Any) -> BenchmarkJob:
    """The live page's replay: the last `minutes` (one of WINDOWS_MIN) up to now."""
    if minutes not in [str(m) for m in WINDOWS_MIN]:
        raise InvalidInput("window_min", f"must be one of {list(WINDOWS_MIN)} minutes")
    until = time.time() * 1000.0
    return replay_submit(recipe=recipe, since_ms=until - int(minutes) * 60_000, until_ms=until, **options)
