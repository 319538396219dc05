"""The real parts: a job over the API -> a Celery worker process runs it -> a websocket client (on
Redis's channel layer) receives progress and `done` -> the database holds the result. Then the
worker is killed mid-job: the job ends `failed` with a reason and a new job succeeds after a restart."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client
from rest_framework.test import APIClient

from heliosweb.catalogs.models import Boot
from heliosweb.jobs.models import BenchmarkJob, JobEvent

from .conftest import ORIGIN, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def _events_until_finished(job_id: int, user) -> list[dict]:
    """Everything a websocket client on the job's stream receives, up to `done` or `failed`."""
    from heliosweb.asgi import application

    cookie = _cookie(user)

    async def listen() -> list[dict]:
        communicator = WebsocketCommunicator(application, f"/ws/jobs/{job_id}/", headers=[cookie, ORIGIN])
        connected, _ = await communicator.connect()
        assert connected
        events = []
        while not events or events[-1]["type"] not in ("done", "failed"):
            message = json.loads(await communicator.receive_from(timeout=60))
            if message["type"] != "ping":  # the keep-alive, every HELIOS_WS_PING_SECONDS
                events.append(message)
        await communicator.disconnect()
        return events

    return async_to_sync(listen)()


def test_a_job_started_over_the_api_streams_to_a_websocket_and_is_stored(stack, maintainer):
    response = _api(maintainer).post("/api/jobs/", {"kind": "pr22", "params": {}}, format="json")
    assert response.status_code == 201
    job_id = response.json()["id"]
    events = _events_until_finished(job_id, maintainer)
    assert events[-1]["type"] == "done", stack.worker_log()[-3000:]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert any(e["type"] == "progress" for e in events)
    assert sum(e["type"] == "arm_result" for e in events) == 4
    job = BenchmarkJob.objects.get(pk=job_id)
    assert job.status == "done" and len(job.result["arms"]) == 4
    assert job.worker_pid == stack.worker.pid
    assert JobEvent.objects.filter(job=job).count() == len(events)


def test_a_capture_job_runs_on_the_gpu_queue_streams_each_measurement_and_stores_a_boot(stack, maintainer, recipe):
    """gpu_runner's kind end to end on CPU: torch loads in the worker's task, each shape's
    measurement reaches the websocket as it lands, and the catalog becomes a boot of the recipe."""
    params = {"preset": "tiny", "device": "cpu", "capacities": [16, 32], "graphs": "prefill", "repeats": 2}
    response = _api(maintainer).post(
        "/api/jobs/", {"kind": "capture", "recipe": recipe.name, "params": params}, format="json"
    )
    assert response.status_code == 201, response.content
    events = _events_until_finished(response.json()["id"], maintainer)
    assert events[-1]["type"] == "done", stack.worker_log()[-3000:]
    measurements = [e for e in events if e["type"] == "measurement"]
    assert [(m["prefill"], m["decode"], m["samples"], m["mode"]) for m in measurements] == [
        (16, 0, 2, "eager-cpu"),
        (32, 0, 2, "eager-cpu"),
    ]
    job = BenchmarkJob.objects.get(pk=response.json()["id"])
    assert job.queue == "gpu" and job.worker_pid == stack.worker.pid
    boot = Boot.objects.get(job=job)
    assert boot.recipe_id == recipe.pk
    assert boot.catalog == [{"prefill": m["prefill"], "decode": 0, "ms": m["median_ms"]} for m in measurements]
    assert boot.provenance["preset"] == "tiny" and boot.provenance["mode"] == "eager-cpu"


def test_a_worker_killed_mid_job_leaves_it_failed_and_a_new_job_succeeds_after_a_restart(stack, maintainer):
    api = _api(maintainer)
    slow = api.post("/api/jobs/", {"kind": "pulse", "params": {"count": 100000, "rate": 200}}, format="json").json()[
        "id"
    ]
    # Wait until it runs and has stored some events, then kill the worker process outright.
    wait_until(lambda: JobEvent.objects.filter(job_id=slow).count() >= 20, what="the slow job to stream events")
    assert BenchmarkJob.objects.get(pk=slow).status == "running"
    stack.kill_worker()
    stored = JobEvent.objects.filter(job_id=slow).count()

    stack.start_worker()  # a restarted worker reaps what its dead predecessor left running
    job = wait_until(lambda: BenchmarkJob.objects.filter(pk=slow, status="failed").first(), what="the job to be failed")
    assert "worker lost" in job.error
    assert JobEvent.objects.filter(job_id=slow).count() == stored + 1  # kept, plus the `failed` event
    assert JobEvent.objects.filter(job_id=slow).order_by("-seq").first().type == "failed"

    fresh = api.post("/api/jobs/", {"kind": "pr22"}, format="json").json()["id"]
    done = wait_until(
        lambda: BenchmarkJob.objects.filter(pk=fresh, status__in=["done", "failed"]).first(),
        what="the new job to finish",
    )
    assert done.status == "done", stack.worker_log()[-3000:]
