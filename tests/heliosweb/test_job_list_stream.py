"""The job-list websocket: a snapshot of recent jobs on connect, then each status change live."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from heliosweb.jobs.services import runner, submission

from .conftest import ORIGIN
from .test_consumers import _connect, _receive, _session_cookie

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_it_sends_recent_jobs_then_each_jobs_status_as_it_changes(maintainer):
    first = await database_sync_to_async(submission.job_create)(kind="pr22", user=maintainer)
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    communicator, connected, _ = await _connect("/ws/jobs/", [cookie, ORIGIN])
    assert connected
    snapshot = await _receive(communicator)
    assert snapshot["type"] == "snapshot" and [j["id"] for j in snapshot["jobs"]] == [first.pk]

    second = await database_sync_to_async(submission.job_create)(kind="pr22", user=maintainer)
    queued = await _receive(communicator)
    assert queued["type"] == "job" and queued["job"]["id"] == second.pk and queued["job"]["status"] == "queued"
    assert queued["job"]["created_by"] == maintainer.username and queued["job"]["result"] is None

    await database_sync_to_async(runner.job_run)(job_id=second.pk)
    statuses = []
    while not statuses or statuses[-1] != "done":
        message = await _receive(communicator)
        statuses.append(message["job"]["status"])
    assert statuses[0] == "running" and message["job"]["progress"]["percent"] == 100
    await communicator.send_to(text_data="{}")
    assert (await _receive(communicator))["type"] == "error"
    await communicator.disconnect()
