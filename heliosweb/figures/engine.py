"""engine: a simulated engine's figures live on its recipe's live page, which follows the telemetry
it posts (all engines of the recipe, each policy change marked); the job page points there."""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from .contract import Figure, JobData, KindViews, empty


def figures(job: JobData) -> list[Figure]:
    where = (
        f'<a href="/recipes/{quote(job.recipe)}/live" target="_self">{escape(job.recipe)}\'s live page</a>'
        if job.recipe
        else "its recipe's live page"
    )
    return [empty("live", "Live telemetry", f"this engine's launches, TTFT and policy changes are drawn on {where}")]


VIEWS = KindViews(figures)
