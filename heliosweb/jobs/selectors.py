"""Reads for benchmark jobs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from scheduler_core.errors import InvalidInput

from heliosweb.errors import NotFound

from .models import FINISHED, BenchmarkJob, JobEvent


def job_list(*, limit: int = 50, kind: str | None = None) -> QuerySet[BenchmarkJob]:
    """Recent jobs for lists: one query (recipe and author joined), no result payloads loaded."""
    qs = BenchmarkJob.objects.select_related("recipe", "created_by").defer("result", "params")
    if kind:
        qs = qs.filter(kind=kind)
    return qs.order_by("-created_at", "-id")[:limit]


def job_get(*, job_id: Any) -> BenchmarkJob:
    try:
        pk = int(job_id)
    except (TypeError, ValueError):
        raise InvalidInput("id", f"not a job id: {job_id!r}") from None
    job = BenchmarkJob.objects.select_related("recipe", "created_by").filter(pk=pk).first()
    if job is None:
        raise NotFound("id", f"no job {pk}")
    return job


def job_exists(*, job_id: int) -> bool:
    return BenchmarkJob.objects.filter(pk=job_id).exists()


def job_events(*, job_id: int, after: int = 0, before: int | None = None, limit: int = 10_000) -> list[dict[str, Any]]:
    """Stored events with numbers in (after, before), oldest first, as the websocket sends them."""
    qs = JobEvent.objects.filter(job_id=job_id, seq__gt=after)
    if before is not None:
        qs = qs.filter(seq__lt=before)
    return [e.as_message() for e in qs.order_by("seq")[:limit]]


def jobs_for_compare(*, ids: list[int]) -> list[BenchmarkJob]:
    if len(ids) < 2:
        raise InvalidInput("ids", "choose two or more jobs to compare")
    jobs = {j.pk: j for j in BenchmarkJob.objects.select_related("recipe").filter(pk__in=ids)}
    missing = [i for i in ids if i not in jobs]
    if missing:
        raise InvalidInput("ids", f"no job {missing[0]}")
    unfinished = [i for i in ids if jobs[i].status not in FINISHED]
    if unfinished:
        raise InvalidInput("ids", f"job {unfinished[0]} has not finished")
    return [jobs[i] for i in ids]


def job_as_api(job: BenchmarkJob) -> dict[str, Any]:
    return {
        "id": job.pk, "kind": job.kind, "recipe": job.recipe.name if job.recipe_id else None,
        "status": job.status, "params": job.params,
        "progress": {"done": job.progress_done, "total": job.progress_total, "percent": job.progress_percent,
                     "message": job.progress_message},
        "result": job.result, "error": job.error or None, "last_seq": job.last_seq,
        "created_at": job.created_at.isoformat(),
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }
