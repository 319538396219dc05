"""Reads for benchmark jobs."""

from __future__ import annotations

import logging
from operator import attrgetter
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from heliosweb.catalogs.models import Boot
from heliosweb.common.inputs import get_by_id
from heliosweb.common.shapes import Shape, when
from scheduler_core.comparison import Pair
from scheduler_core.errors import InvalidInput

from .models import FINISHED, BenchmarkJob, JobEvent
from .registry import job_kinds

log = logging.getLogger(__name__)


def job_list(*, limit: int = 50, kind: str | None = None, recipe: str | None = None) -> QuerySet[BenchmarkJob]:
    """Recent jobs for lists: one query (recipe and author joined), no result payloads loaded."""
    qs = BenchmarkJob.objects.select_related("recipe", "created_by").defer("result", "params")
    if kind:
        qs = qs.filter(kind=kind)
    if recipe:
        qs = qs.filter(recipe__name=recipe)
    return qs.order_by("-created_at", "-id")[:limit]


def job_get(*, job_id: Any) -> BenchmarkJob:
    """One job by an id from outside: InvalidInput if not an integer, NotFound if no such job."""
    return get_by_id(BenchmarkJob.objects.select_related("recipe", "created_by"), job_id, what="job")


def job_exists(*, job_id: int) -> bool:
    return BenchmarkJob.objects.filter(pk=job_id).exists()


def job_events(*, job_id: int, after: int = 0, before: int | None = None, limit: int = 10_000) -> list[dict[str, Any]]:
    """Stored events with numbers in (after, before), oldest first, as the websocket sends them."""
    qs = JobEvent.objects.filter(job_id=job_id, seq__gt=after)
    if before is not None:
        qs = qs.filter(seq__lt=before)
    return [e.as_message() for e in qs.order_by("seq")[:limit]]


# Each job compared costs its figures and its result's tables (~50 ms for a large sweep): the page
# stays well under a second, and more columns than this are unreadable anyway.
MAX_COMPARE_JOBS = 8


def jobs_for_compare(*, ids: list[int]) -> list[BenchmarkJob]:
    if len(ids) < 2:
        raise InvalidInput("ids", "choose two or more jobs to compare")
    if len(ids) > MAX_COMPARE_JOBS:
        raise InvalidInput("ids", f"{len(ids)} jobs chosen: at most {MAX_COMPARE_JOBS} can be compared at once")
    # Results read only where needed (a figure built, a job with no reading): 7 MB apiece at 19,500 requests.
    jobs = {j.pk: j for j in BenchmarkJob.objects.select_related("recipe").defer("result").filter(pk__in=ids)}
    missing = [i for i in ids if i not in jobs]
    if missing:
        raise InvalidInput("ids", f"no job {missing[0]}")
    unfinished = [i for i in ids if jobs[i].status not in FINISHED]
    if unfinished:
        raise InvalidInput("ids", f"job {unfinished[0]} has not finished")
    return [jobs[i] for i in ids]


PROGRESS = inline_serializer(
    "Progress",
    {
        "done": serializers.IntegerField(),
        "total": serializers.IntegerField(),
        "percent": serializers.IntegerField(),
        "message": serializers.CharField(),
    },
)
JOB: Shape[BenchmarkJob] = Shape(
    "Job",
    {
        "id": (serializers.IntegerField(), attrgetter("pk")),
        "kind": (serializers.CharField(), attrgetter("kind")),
        "recipe": (serializers.CharField(allow_null=True), lambda job: job.recipe.name if job.recipe else None),
        "status": (
            serializers.ChoiceField(["queued", "running", "done", "failed", "cancelled"]),
            attrgetter("status"),
        ),
        "params": (serializers.DictField(allow_null=True, help_text="null in lists"), attrgetter("params")),
        "catalog_sources": (
            serializers.DictField(
                allow_null=True,
                child=serializers.ListField(child=serializers.DictField()),
                help_text="per catalog parameter given as stored boots ({boot} / {boots}): one entry per boot, "
                "{boot, repaired} and, repaired, replaced: [{prefill, decode, reason, ratio, was_ms, ms, source, "
                "from_boots}]; empty when every catalog was spelled out; null in lists",
            ),
            attrgetter("catalog_sources"),
        ),
        "trace_sources": (
            serializers.DictField(
                allow_null=True,
                child=serializers.DictField(),
                help_text="per trace parameter given as a stored trace ({trace: name}): {trace, sha256, requests}; "
                "a replay of telemetry (POST /api/recipes/<name>/replay/): {telemetry, engine, since_ms, until_ms, "
                "window_utc, requests, execution}; empty when every trace was spelled out; null in lists",
            ),
            attrgetter("trace_sources"),
        ),
        "progress": (
            PROGRESS,
            lambda job: {
                "done": job.progress_done,
                "total": job.progress_total,
                "percent": job.progress_percent,
                "message": job.progress_message,
            },
        ),
        "result": (serializers.JSONField(allow_null=True), attrgetter("result")),
        "summary": (
            serializers.CharField(allow_null=True, help_text="the result as the analysis's text table"),
            lambda job: job_summary(job),
        ),
        "error": (serializers.CharField(allow_null=True), lambda job: job.error or None),
        "last_seq": (serializers.IntegerField(), attrgetter("last_seq")),
        "created_by": (
            serializers.CharField(allow_null=True),
            lambda job: job.created_by.username if job.created_by else None,
        ),
        "created_at": (serializers.DateTimeField(), lambda job: when(job.created_at)),
        "started_at": (serializers.DateTimeField(allow_null=True), lambda job: when(job.started_at)),
        "finished_at": (serializers.DateTimeField(allow_null=True), lambda job: when(job.finished_at)),
    },
)
LISTED_WITHOUT = ("params", "catalog_sources", "trace_sources", "result", "summary")  # null in lists


def job_as_api(job: BenchmarkJob, *, full: bool = True, pair: Pair | None = None) -> dict[str, Any]:
    """A job as the API shows it; lists leave out (`full=False`) params, catalog and trace sources, result and summary.
    `pair`: what the summary's deltas compare (by default the first two policies run)."""
    if full and pair is not None:
        return {**JOB.of(job, left_out=("summary",)), "summary": job_summary(job, pair)}
    return JOB.of(job, left_out=() if full else LISTED_WITHOUT)


def job_summary(job: BenchmarkJob, pair: Pair | None = None) -> str | None:
    """The analysis's own text rendering of a finished result (the CLI's table), if it has one,
    its deltas comparing `pair` where it compares policies (by default the first two run)."""
    kind = job_kinds().get(job.kind)
    if job.result is None or kind is None or kind.analysis.format_text is None:
        return None
    try:
        if kind.analysis.pair_text is not None:
            return kind.analysis.pair_text(job.result, pair)
        return kind.analysis.format_text(job.result)
    except (KeyError, TypeError, ValueError):  # a result stored by an older version of the analysis
        log.warning("job %s: cannot format its %s result", job.pk, job.kind, exc_info=True)
        return None


def catalog_sources_of(job: BenchmarkJob) -> list[tuple[str, list[tuple[int, str | None, str]]]]:
    """Per catalog parameter the job took from stored boots, each boot's id, its recipe (None once
    the boot is deleted) and what became of it, e.g. ("boot_catalog", [(12, "tiny-cpu", ", repaired:
    4096 replaced by the median of boots #9, #10, #11 (105.60 → 66.66 ms; 1.59x → 1.00x the recipe's
    usual)")]): the page links "boot #12" to its row on the recipe page and reads on. Nothing for
    catalogs spelled out in the params."""
    ids = {s["boot"] for boots in job.catalog_sources.values() for s in boots}
    recipes = dict(Boot.objects.filter(pk__in=ids).values_list("pk", "recipe__name"))
    return [
        (name, [(s["boot"], recipes.get(s["boot"]), _boot_source(s)) for s in boots])
        for name, boots in job.catalog_sources.items()
    ]


def _boot_source(source: dict[str, Any]) -> str:
    if not source.get("repaired"):
        return " as stored"
    replaced = source.get("replaced") or []
    if not replaced:
        return ", repaired: nothing flagged, so as stored"
    return ", repaired: " + ", ".join(_replacement(r) for r in replaced)


def _replacement(r: dict[str, Any]) -> str:
    shape = str(r["prefill"]) if not r["decode"] else f"{r['prefill']}+{r['decode']}"
    if r["ms"] == r["was_ms"]:
        return f"{shape} kept ({r['reason']}; nothing to replace it)"
    if r.get("from_boots"):
        by = "the median of boots " + ", ".join(f"#{b}" for b in r["from_boots"])
    else:
        by = "this boot's affine fit" if "fit" in r["source"] else r["source"]
    after = r["ratio"] * r["ms"] / r["was_ms"] if r["was_ms"] else r["ratio"]
    return f"{shape} replaced by {by} ({r['was_ms']:.2f} → {r['ms']:.2f} ms; {r['ratio']:.2f}x → {after:.2f}x)"
