"""Reads for figures and exports: a job's stored result and the events its kind's figures need."""

from __future__ import annotations

import json
from typing import Any, cast

from heliosweb.jobs import selectors as job_selectors
from heliosweb.jobs.models import BenchmarkJob, JobEvent

from .contract import JobData, KindViews, to_json
from .figure_cache import figures_json
from .registry import views_for

MAX_EVENTS = 20_000  # the figures window: a live pulse of a million events draws its last ones


def job_data(job: BenchmarkJob, views: KindViews, *, with_events: bool = True) -> JobData:
    """The job as figures see it, with only the event types its kind's figures read, up to the
    job's `last_seq` as read (the page grows the figures with the events numbered above it).
    A finished result's tables need no events (`with_events=False`)."""
    events: list[dict] = []
    if with_events and views.event_types:
        rows = JobEvent.objects.filter(job_id=job.pk, seq__lte=job.last_seq, type__in=views.event_types)
        # Plain tuples, not model instances: a 1,000-request simulate reads 2,000 launch events.
        newest = rows.order_by("-seq").values_list("seq", "type", "data")[:MAX_EVENTS]
        events = [{**data, "type": type_, "seq": seq} for seq, type_, data in reversed(newest)]
    recipe = job.recipe.name if job.recipe is not None else None
    return JobData(job.pk, job.kind, job.status, job.params, job.result, events, job.last_seq, recipe)


def job_figures_json(*, job_id: object) -> str:
    """`GET /api/jobs/<id>/figures/`: the job's figures and their live growth, as JSON text (a
    finished job's built once: `figure_cache`)."""
    return _figures_text(job_selectors.job_get(job_id=job_id))


def figures_payload(job: BenchmarkJob) -> list[dict[str, Any]]:
    """The job's `/figures/` answer as data (decimated; a finished job's kept once built): what
    compare overlays."""
    return cast(list[dict[str, Any]], json.loads(_figures_text(job)))


def _figures_text(job: BenchmarkJob) -> str:
    views = views_for(job.kind)

    def build() -> str:
        data = job_data(job, views)
        return to_json(views.figures(data), views, seq=data.seq)

    return figures_json(job, build)
