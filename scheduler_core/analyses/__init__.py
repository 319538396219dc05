"""Analyses maintainers run to decide between policies. Each returns plain data and reports
progress through a callback, so the CLI, the tests and Celery all drive the same code."""

from __future__ import annotations

from typing import Any

from . import boots, capacity, fuzz, pr22, replay, simulate, sweep
from .contract import Analysis

ANALYSES: dict[str, Analysis[Any]] = {
    a.name: a
    for a in (
        pr22.ANALYSIS,
        sweep.ANALYSIS,
        boots.ANALYSIS,
        fuzz.ANALYSIS,
        simulate.ANALYSIS,
        capacity.ANALYSIS,
        replay.ANALYSIS,
    )
}
