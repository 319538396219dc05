"""Row 26 of issue 18: the queue cap's `Retry-After` follows the queue (the jobs ahead of the
user's oldest waiting one, at the pace the queue finished jobs lately), not a fixed 30 s."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient

from heliosweb.jobs.models import BenchmarkJob


def finished(count: int, within_s: float) -> None:
    """`count` sim jobs finished over the last `within_s` seconds."""
    now = timezone.now()
    for i in range(count):
        at = now - timedelta(seconds=within_s * i / max(count - 1, 1))
        BenchmarkJob.objects.create(kind="pr22", queue="sim", status="done", started_at=at, finished_at=at)


def test_retry_after_is_the_wait_the_queue_pace_gives(settings, maintainer, queued):
    settings.HELIOS_MAX_QUEUED_JOBS_PER_USER = 2
    api = APIClient()
    api.force_authenticate(maintainer)
    for _ in range(3):  # someone else's jobs, ahead of the user's
        BenchmarkJob.objects.create(kind="pr22", queue="sim", status="queued")
    for _ in range(2):
        assert api.post("/api/jobs/", {"kind": "pr22"}, format="json").status_code == 201
    finished(41, within_s=20.0)  # 2 jobs a second
    refused = api.post("/api/jobs/", {"kind": "pr22"}, format="json")
    assert refused.status_code == 429
    assert refused["Retry-After"] == "2"  # 3 ahead + the user's oldest = 4 jobs at 2/s

    BenchmarkJob.objects.filter(status="done").update(finished_at=timezone.now() - timedelta(hours=1))
    idle = api.post("/api/jobs/", {"kind": "pr22"}, format="json")  # no pace to go by: the setting
    assert idle.status_code == 429 and idle["Retry-After"] == str(settings.HELIOS_QUEUED_RETRY_AFTER_SECONDS)
