"""A job's events take one path: numbered, stored in the database, then sent to the channel group
`job.<id>` (in batches while the job runs: channels_redis drops group messages once a channel holds
100 unread ones, so the page gets few, larger messages and refills gaps from the database by
number). Every status change is also announced to the job lists (group `jobs`)."""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction
from django.utils import timezone

from heliosweb.realtime.push import send_event

from ..models import BenchmarkJob, JobEvent, JobStatus
from ..selectors import job_as_api

LIST_GROUP = "jobs"  # every job's status and progress, for the pages that list jobs


def group_name(job_id: int) -> str:
    """The channel group of one job's live events."""
    return f"job.{job_id}"


def event_data(event: dict[str, Any]) -> dict[str, Any]:
    """What a stored event keeps in its JSON column (type and number have their own columns)."""
    return {k: v for k, v in event.items() if k not in ("type", "seq")}


def event_append(job_id: int, event: dict[str, Any]) -> JobEvent:
    """Store one event under the next number and send it; used outside a running pump. Sent only
    once the caller's transaction commits: a listener told `done` must find the job done."""
    with transaction.atomic():
        job = BenchmarkJob.objects.select_for_update().only("last_seq").get(pk=job_id)
        seq = job.last_seq + 1
        event = {**event, "ts": event.get("ts", time.time())}
        stored = JobEvent.objects.create(job_id=job_id, seq=seq, type=event["type"], data=event_data(event))
        BenchmarkJob.objects.filter(pk=job_id).update(last_seq=seq)
        transaction.on_commit(lambda: _send_and_announce(job_id, stored.as_message()))
    return stored


def _send_and_announce(job_id: int, message: dict[str, Any]) -> None:
    events_send(job_id, [message])
    job_announce(job_id)


def events_send(job_id: int, messages: list[dict[str, Any]]) -> None:
    """One batch to the job's group; a client that misses it refills it from the database."""
    if messages:
        send_event(group_name(job_id), {"type": "job.events", "events": messages})


def job_announce(job_id: int) -> None:
    """Tell the job lists (dashboard, /jobs/) where a job stands now."""
    job = BenchmarkJob.objects.select_related("recipe", "created_by").filter(pk=job_id).first()
    if job is not None:
        send_event(LIST_GROUP, {"type": "jobs.status", "job": job_as_api(job, full=False)})


def job_end(*, job_id: int, status: str, event: dict[str, Any], from_status: tuple[str, ...], **fields: Any) -> bool:
    """Move a job from one of `from_status` to a terminal `status` and store its terminal event, in
    one transaction: a follower told the job ended always finds that event, and a job never ends
    without one (the two were written apart, and a disk filling between them left a job `failed`
    with no `failed` event). False, and nothing written, when the job was no longer in `from_status`."""
    with transaction.atomic():
        updated = BenchmarkJob.objects.filter(pk=job_id, status__in=from_status).update(
            status=status, finished_at=timezone.now(), **fields
        )
        if updated:
            event_append(job_id, event)
    return bool(updated)


def job_fail(*, job_id: int, reason: str, from_status: tuple[str, ...] = (JobStatus.RUNNING,)) -> bool:
    """Mark a job failed with a reason (keeping the events and results stored so far)."""
    event = {"type": "failed", "reason": reason}
    return job_end(job_id=job_id, status=JobStatus.FAILED, event=event, from_status=from_status, error=reason)
