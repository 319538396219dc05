"""Thin Celery adapter: the periodic prune (beat, every 10 minutes, on the `maint` queue: settings.CELERY_BEAT_SCHEDULE)."""

from __future__ import annotations

from celery import shared_task

from . import ingest


@shared_task(name="heliosweb.telemetry.tasks.prune_telemetry", ignore_result=True)
def prune_telemetry() -> dict[str, int]:
    return ingest.telemetry_prune()
