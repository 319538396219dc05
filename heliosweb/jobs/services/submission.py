"""Submitting jobs: `job_create` validates kind, recipe and params once, stores the job `queued`
and queues it after commit; `job_cancel` stops one. Invalid input stores and queues nothing."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from heliosweb.audit.services import audit_append
from heliosweb.catalogs.health import boot_repaired
from heliosweb.catalogs.selectors import boot_catalogs
from heliosweb.celery import app as celery_app
from heliosweb.common.errors import Conflict, NotFound, Throttled
from heliosweb.common.permissions import Actor
from heliosweb.common.redis_errors import redis_refusal
from heliosweb.recipes.models import Recipe
from heliosweb.recipes.selectors import recipe_named
from heliosweb.traces.selectors import trace_get, trace_traffic
from scheduler_core.analyses.params import CatalogListParam, CatalogParam, TraceParam
from scheduler_core.errors import InvalidInput

from ..models import BenchmarkJob, JobStatus
from ..registry import JobKind, get_kind
from .events import job_announce, job_end, job_fail

log = logging.getLogger(__name__)

NO_PARAMS: Mapping[str, Any] = MappingProxyType({})  # every parameter at its default

# Queued by name: the web process never imports the worker's task code (`tasks` imports this module).
RUN_JOB_TASK = "heliosweb.jobs.tasks.run_job"


def job_create(
    *,
    kind: Any,
    recipe: Any = None,
    params: Any = NO_PARAMS,
    user: Actor | None = None,
    audit_action: str = "job_started",
) -> BenchmarkJob:
    """Validate everything, store the job `queued`, and queue it once the transaction commits.

    Params are parsed once here (`Analysis.validate`: a catalog becomes a `Catalog`) and turned
    back into JSON only to be stored (`Analysis.to_json`), which is the boundary: the stored job
    keeps the same dicts it always did, and `job_run` types them again with `Analysis.from_json`.

    Raises InvalidInput naming the field (`kind`, `recipe`, `params.<name>`); nothing is stored
    or queued then.
    """
    job_kind = get_kind(kind)
    recipe_obj = _recipe_or_none(recipe)
    if job_kind.analysis.needs_recipe and recipe_obj is None:
        raise InvalidInput("recipe", job_kind.analysis.needs_recipe)
    if not isinstance(params, Mapping):  # `null` too: leave `params` out for every default
        raise InvalidInput("params", "must be an object of parameter names to values")
    _check_queue_room(user)
    try:
        resolved, sources = _with_boot_catalogs(job_kind, job_kind.analysis.with_current_names(params))
        resolved, traces = _with_stored_traces(job_kind, resolved)
        clean = job_kind.analysis.validate(resolved)
    except InvalidInput as exc:
        raise exc.under("params") from None
    if job_kind.check_recipe is not None:
        job_kind.check_recipe(clean, recipe_obj)
    with transaction.atomic():
        job = BenchmarkJob.objects.create(
            kind=job_kind.name,
            queue=job_kind.queue_for(clean),
            recipe=recipe_obj,
            params=job_kind.analysis.to_json(clean),
            catalog_sources=sources,
            trace_sources=traces,
            created_by=user if isinstance(user, User) else None,
        )
        _audit(audit_action, job, user, after={"kind": job.kind, "queue": job.queue})
        transaction.on_commit(lambda: _enqueue_and_announce(job))
    return job


def _check_queue_room(user: Actor | None) -> None:
    """One user may hold at most HELIOS_MAX_QUEUED_JOBS_PER_USER jobs waiting for a worker, so
    one script cannot fill the queue ahead of everyone else."""
    limit = settings.HELIOS_MAX_QUEUED_JOBS_PER_USER
    if not isinstance(user, User):
        return
    if BenchmarkJob.objects.filter(created_by=user, status="queued").count() >= limit:
        raise Throttled(
            "queued_jobs",
            f"you have {limit} jobs queued, the most one user may have waiting: start more once some have started",
            retry_after=queue_wait_seconds(user),
        )


RATE_WINDOW_S = 300  # the queue's pace is read from the jobs it finished this long back
MAX_RETRY_AFTER_S = 3600


def queue_wait_seconds(user: User) -> int:
    """When the oldest of `user`'s queued jobs should start: the jobs ahead of it on its queue (and
    itself), at the pace that queue finished jobs lately. A fixed 30 s told a script honouring it
    to wait 30 s where the queue drained a job in a fraction of one (0.97 jobs/s for one user).
    `HELIOS_QUEUED_RETRY_AFTER_SECONDS` when the queue finished nothing lately (no pace to go by)."""
    oldest = BenchmarkJob.objects.filter(created_by=user, status="queued").order_by("created_at", "id").first()
    if oldest is None:
        return settings.HELIOS_QUEUED_RETRY_AFTER_SECONDS
    queue = BenchmarkJob.objects.filter(queue=oldest.queue)
    ahead = queue.filter(status="queued", created_at__lt=oldest.created_at).count() + 1
    now = timezone.now()
    finished = queue.filter(started_at__isnull=False, finished_at__gte=now - timedelta(seconds=RATE_WINDOW_S))
    first = finished.order_by("finished_at").values_list("finished_at", flat=True).first()
    if first is None:
        return settings.HELIOS_QUEUED_RETRY_AFTER_SECONDS
    per_second = finished.count() / max((now - first).total_seconds(), 1.0)
    return min(MAX_RETRY_AFTER_S, max(1, math.ceil(ahead / per_second)))


def _with_boot_catalogs(kind: JobKind, params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A catalog parameter may name stored boots instead of spelling a catalog out:
    `{"boot": id}` (catalog) or `{"boots": [id, ...]}` (catalog_list), with `"repaired": true`
    for their repaired versions (flagged shapes replaced: `catalogs.health`). The job keeps the
    catalogs themselves, so it stays reproducible whatever happens to the boots later, and where
    they came from (the second value, stored as the job's `catalog_sources`): per parameter, each
    boot's id and, repaired, what was replaced by what, from which boots."""
    out, sources = dict(params), {}
    for p in kind.analysis.params:
        value = out.get(p.name)
        if isinstance(p, CatalogParam):
            ref = "boot"
        elif isinstance(p, CatalogListParam):
            ref = "boots"
        else:
            continue
        if not isinstance(value, Mapping) or ref not in value or set(value) - {ref, "repaired"}:
            continue
        ids = [value[ref]] if ref == "boot" else value[ref]
        if not isinstance(ids, list):
            raise InvalidInput(f"{p.name}.{ref}", "must be a list of boot ids", param=p.name)
        repaired = value.get("repaired", False)
        if not isinstance(repaired, bool):
            raise InvalidInput(f"{p.name}.repaired", f"must be true or false, got {repaired!r}", param=p.name)
        try:
            catalogs = boot_catalogs(ids=ids, field=f"{p.name}.{ref}")
            named = [{"boot": i, "repaired": False} for i in ids]
            if repaired:
                pairs = [boot_repaired(boot_id=i, field=f"{p.name}.{ref}") for i in ids]
                catalogs, named = [c for c, _ in pairs], [why for _, why in pairs]
        except InvalidInput as exc:
            exc.param = p.name
            raise
        out[p.name] = catalogs[0] if ref == "boot" else catalogs
        sources[p.name] = named
    return out, sources


def _with_stored_traces(kind: JobKind, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A trace parameter may name a stored trace, `{"trace": name}`: it becomes that trace's
    requests as scheduler_core parsed them at upload (the job keeps them, bounded as any trace given
    inline), and the job records which trace it was (the second value, its `trace_sources`)."""
    out, sources = dict(params), {}
    for p in kind.analysis.params:
        value = out.get(p.name)
        if not isinstance(p, TraceParam) or not isinstance(value, Mapping) or set(value) != {"trace"}:
            continue
        try:
            stored = trace_get(name=value["trace"], field=f"{p.name}.trace")
        except NotFound as exc:
            raise InvalidInput(exc.field, exc.message, param=p.name) from None
        if stored.requests > p.max_inline:
            raise InvalidInput(
                f"{p.name}.trace",
                f"{stored.name!r} has {stored.requests:,} requests; a job keeps at most {p.max_inline:,}",
                param=p.name,
            )
        out[p.name] = trace_traffic(stored)
        sources[p.name] = {"trace": stored.name, "sha256": stored.sha256, "requests": stored.requests}
    return out, sources


def _recipe_or_none(recipe: Any) -> Recipe | None:
    if recipe in (None, ""):
        return None
    return recipe_named(recipe)


def _enqueue_and_announce(job: BenchmarkJob) -> None:
    job_enqueue(job)
    job_announce(job.pk)


def job_enqueue(job: BenchmarkJob) -> None:
    """To the job's queue, with its time limit: past it Celery raises in a prefork pool's job
    (SoftTimeLimitExceeded, the job fails "time limit exceeded"), and kills it a minute later."""
    limit = get_kind(job.kind).time_limit_s(job.params)
    limits = {"soft_time_limit": limit, "time_limit": limit + 60} if limit else {}
    try:
        celery_app.send_task(RUN_JOB_TASK, args=[job.pk], queue=job.queue, task_id=f"job-{job.pk}", **limits)
    except Exception as exc:  # the broker is down or refuses writes: say so on the job, never leave it queued
        refusal = redis_refusal(exc)
        log.error("could not queue job %s: %s", job.pk, refusal or exc, exc_info=refusal is None)
        job_fail(job_id=job.pk, reason=f"could not queue the job: {refusal or exc}", from_status=(JobStatus.QUEUED,))


def job_cancel(*, job: BenchmarkJob, user: Actor | None = None, audit_action: str = "job_cancelled") -> BenchmarkJob:
    """Queued: cancelled at once. Running: the worker stops at the analysis's next event. Audited.
    Checked under the job's row lock: a second cancel (a double click, a retry) of a job already
    finished or already stopping is refused (Conflict, 409) naming `status` and writes nothing."""
    with transaction.atomic():
        locked = BenchmarkJob.objects.select_for_update().only("status", "cancel_requested").get(pk=job.pk)
        job.status, job.cancel_requested = locked.status, locked.cancel_requested
        before = str(job.status)
        if job.status == JobStatus.RUNNING and job.cancel_requested:
            raise Conflict("status", f"job {job.pk} is stopping already (a cancel was requested)")
        if job.status == JobStatus.QUEUED:
            reason = "cancelled before it started"
            event = {"type": "cancelled", "reason": reason}
            job_end(
                job_id=job.pk, status=JobStatus.CANCELLED, event=event, from_status=(JobStatus.QUEUED,), error=reason
            )
        elif job.status == JobStatus.RUNNING:
            BenchmarkJob.objects.filter(pk=job.pk).update(cancel_requested=True)
        else:
            raise Conflict("status", f"job {job.pk} is already {job.status}")
        job.refresh_from_db()
        after = {"status": str(job.status), "cancel_requested": job.cancel_requested, "kind": job.kind}
        _audit(audit_action, job, user, before={"status": before}, after=after)
    return job


def _audit(action: str, job: BenchmarkJob, user: Actor | None, **change: Any) -> None:
    """A job's start or cancel on the audit chain; "system" where no user acted (a script, the engine)."""
    recipe = job.recipe.name if job.recipe else ""
    audit_append(
        action=action, actor=user, actor_name="system", object_type="job", object_id=job.pk, recipe=recipe, **change
    )
