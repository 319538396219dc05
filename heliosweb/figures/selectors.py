"""Reads for figures and exports: a job's stored result and the events its kind's figures need."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from heliosweb.jobs import selectors as job_selectors
from heliosweb.jobs.models import BenchmarkJob, JobEvent
from heliosweb.jobs.result_reading import readings
from scheduler_core.comparison import Pair, picked_pair

from .contract import JobData, KindViews, policies_run, to_json
from .figure_cache import figures_json
from .registry import views_for

MAX_EVENTS = 20_000  # the figures window: a live pulse of a million events draws its last ones


def job_data(job: BenchmarkJob, views: KindViews, *, with_events: bool = True, pair: Pair | None = None) -> JobData:
    """The job as figures see it, with only the event types its kind's figures read, up to the
    job's `last_seq` as read (the page grows the figures with the events numbered above it).
    A finished result's tables need no events (`with_events=False`). `pair`: what its deltas
    compare (`job_pair`), by default the first two policies it ran."""
    events: list[dict] = []
    if with_events and views.event_types:
        rows = JobEvent.objects.filter(job_id=job.pk, seq__lte=job.last_seq, type__in=views.event_types)
        # Plain tuples, not model instances: a 1,000-request simulate reads 2,000 launch events.
        newest = rows.order_by("-seq").values_list("seq", "type", "data")[:MAX_EVENTS]
        events = [{**data, "type": type_, "seq": seq} for seq, type_, data in reversed(newest)]
    recipe = job.recipe.name if job.recipe is not None else None
    return JobData(job.pk, job.kind, job.status, job.params, job.result, events, job.last_seq, recipe, pair)


def job_pair(job: BenchmarkJob, query: Mapping[str, str]) -> Pair | None:
    """The pair a page or an export compares: `?before=&after=` among the policies the job ran
    (`comparison.picked_pair`: InvalidInput naming the field), by default its first two."""
    return picked_pair(_ran(job), query.get("before") or None, query.get("after") or None)


def _ran(job: BenchmarkJob) -> list[str]:
    """The policies `job` ran, from its reading where it is done (the result without its
    per-request rows: a 19k-request job's result is megabytes), else from its result."""
    reading = readings([job]).get(job.pk)
    return policies_run(reading.lean if reading is not None else job.result)


def job_figures_json(*, job_id: object, query: Mapping[str, str] | None = None) -> str:
    """`GET /api/jobs/<id>/figures/[?before=&after=]`: the job's figures and their live growth, its
    deltas comparing the pair asked for (`job_pair`), as JSON text (a finished job's built once per
    pair: `figure_cache`)."""
    job = job_selectors.job_get(job_id=job_id)
    return _figures_text(job, job_pair(job, query or {}))


def figures_payload(job: BenchmarkJob) -> list[dict[str, Any]]:
    """The job's `/figures/` answer as data (decimated; a finished job's kept once built): what
    compare overlays."""
    return cast(list[dict[str, Any]], json.loads(_figures_text(job, job_pair(job, {}))))


def _figures_text(job: BenchmarkJob, pair: Pair | None) -> str:
    """`pair`: what `job_pair` picked (None: the job compares no two policies)."""
    views = views_for(job.kind)

    def build() -> str:
        data = job_data(job, views, pair=pair)
        return to_json(views.figures(data), views, seq=data.seq)

    return figures_json(job, build, variant=pair.label if pair else "")
