"""Thin Celery adapters: the periodic prune (beat, every 10 minutes) and the `/metrics` snapshot (every
`HELIOS_METRICS_SNAPSHOT_SECONDS`), on the `maint` queue: settings.CELERY_BEAT_SCHEDULE."""

from __future__ import annotations

from celery import shared_task

from . import ingest, metrics, metrics_snapshot


@shared_task(name="heliosweb.telemetry.tasks.prune_telemetry", ignore_result=True)
def prune_telemetry() -> dict[str, int]:
    return ingest.telemetry_prune()


@shared_task(name="heliosweb.telemetry.tasks.snapshot_metrics", ignore_result=True)
def snapshot_metrics() -> int:
    return metrics_snapshot.snapshot_store(metrics.exposition)
