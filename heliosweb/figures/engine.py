"""engine: a simulated engine's figures live on its recipe's live page, which follows the telemetry
it posts (all engines of the recipe, each policy change marked); the job page points there."""

from __future__ import annotations

from .contract import Figure, JobData, KindViews, empty


def figures(job: JobData) -> list[Figure]:
    return [
        empty(
            "live",
            "Live telemetry",
            "this engine's launches, TTFT and policy changes are drawn on its recipe's live page (/recipes/<name>/live)",
        )
    ]


VIEWS = KindViews(figures)
