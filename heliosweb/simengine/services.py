"""Starting and stopping a recipe's simulated engine: a job of kind `engine` (declared in
`engine.py`), at most one per recipe."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from heliosweb.common.errors import Conflict
from heliosweb.common.permissions import Actor
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.jobs.services.submission import job_cancel, job_create
from heliosweb.recipes.models import Recipe

ENGINE_KIND = "engine"  # the simulated engine's job kind


def engine_start(*, recipe: Recipe, user: Actor, params: dict[str, Any] | None = None) -> BenchmarkJob:
    """Queue a simulated engine for `recipe`; at most one per recipe: under the recipe's row lock,
    of two starts at once one queues an engine and the other is a Conflict."""
    with transaction.atomic():
        Recipe.objects.select_for_update().filter(pk=recipe.pk).first()
        active = engine_job_active(recipe=recipe)
        if active is not None:
            raise Conflict("recipe", f"a simulated engine already runs for {recipe.name} (job {active.pk})")
        return job_create(
            kind=ENGINE_KIND, recipe=recipe.name, params=params or {}, user=user, audit_action="engine_started"
        )


def engine_stop(*, recipe: Recipe, user: Actor | None = None) -> BenchmarkJob:
    """Stop the recipe's simulated engine (it stops within about a second); a second stop is Conflict."""
    with transaction.atomic():
        Recipe.objects.select_for_update().filter(pk=recipe.pk).first()
        active = engine_job_active(recipe=recipe)
        if active is None:
            raise Conflict("recipe", f"no simulated engine runs for {recipe.name}")
        if active.cancel_requested:
            raise Conflict("recipe", f"the simulated engine of {recipe.name} (job {active.pk}) is stopping already")
        return job_cancel(job=active, user=user, audit_action="engine_stopped")


def engine_job_active(*, recipe: Recipe) -> BenchmarkJob | None:
    return (
        BenchmarkJob.objects.filter(kind=ENGINE_KIND, recipe=recipe, status__in=(JobStatus.QUEUED, JobStatus.RUNNING))
        .order_by("-id")
        .first()
    )
