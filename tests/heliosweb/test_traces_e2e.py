"""Stored traces through the real parts: a simulate job naming a stored trace runs in a real
worker on exactly its requests, and the simulated engine, on a real engine worker and a real ASGI
server, serves a stored trace in a loop (its telemetry's requests are the trace's)."""

from __future__ import annotations

from collections import Counter

import pytest
from rest_framework.test import APIClient

from heliosweb.jobs.models import BenchmarkJob
from heliosweb.simengine.services import engine_start, engine_stop
from heliosweb.telemetry.models import TelemetryBatch
from heliosweb.traces.services import trace_upload
from scheduler_core.traffic import read_trace

from .conftest import log_in_and_open, needs_chromium, wait_until
from .test_traces import AZURE, JSONL

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_worker_runs_simulate_on_exactly_the_stored_trace(stack, maintainer):
    trace_upload(user=maintainer, name="azure", content=AZURE.read_bytes())
    client = APIClient()
    client.force_authenticate(maintainer)
    params = {"trace": {"trace": "azure"}, "limit": 200, "policies": ["cost", "rule"]}
    response = client.post("/api/jobs/", {"kind": "simulate", "params": params}, format="json")
    assert response.status_code == 201, response.content
    job = wait_until(
        lambda: BenchmarkJob.objects.filter(pk=response.json()["id"], status__in=("done", "failed")).first(),
        timeout=120,
        what="the simulate job to finish",
    )
    assert job.status == "done", (job.error, stack.worker_log()[-3000:])
    file = read_trace(str(AZURE)).select(limit=200)
    expected = {i: (t, p, o) for t, p, o, i in zip(file.arrival_ms, file.prompt_tokens, file.output_tokens, file.ids)}
    assert [p["policy"] for p in job.result["policies"]] == ["cost", "rule"]
    for policy in job.result["policies"]:
        got = {r["id"]: (r["arrival_ms"], r["prompt_tokens"], r["output_tokens"]) for r in policy["per_request"]}
        assert got.keys() == expected.keys()
        for rid, (t, p, o) in expected.items():
            assert got[rid][1:] == (p, o) and got[rid][0] == pytest.approx(t, abs=1e-6)


def test_the_simulated_engine_serves_a_stored_trace_in_a_loop(stack, recipe, maintainer):
    trace_upload(user=maintainer, name="small", content=JSONL)
    stack.start_web()
    stack.start_engine_worker()
    job = engine_start(
        recipe=recipe, user=maintainer, params={"trace": {"trace": "small"}, "pace": 5.0, "batch_ms": 200}
    )
    engine = f"sim-job-{job.pk}"

    def requests() -> list[dict]:
        return [r for b in TelemetryBatch.objects.filter(engine=engine) for r in b.records if r["type"] == "request"]

    # 40 requests over ~10 s of trace, paced 5x: a second pass begins after ~2 s of wall time
    wait_until(lambda: len(requests()) >= 60, timeout=120, what="more than one pass of the trace")
    engine_stop(recipe=recipe)
    served = Counter(r["prompt_tokens"] for r in requests())
    prompts = {100 + 37 * i for i in range(40)}
    assert set(served) <= prompts  # every request the engine served is one of the trace's
    assert max(served.values()) >= 2  # and some were served again: the trace loops


@pytest.mark.browser
@needs_chromium
def test_upload_a_trace_in_chromium_and_run_capacity_on_it(stack, page, maintainer, tmp_path):
    stack.start_web()
    path = tmp_path / "ui.jsonl"
    path.write_bytes(JSONL)
    log_in_and_open(page, f"{stack.base_url}/traces", "maint", "pw-maint-123")
    page.fill("#trace-upload input[name=name]", "ui-trace")
    page.set_input_files("#trace-upload input[name=file]", str(path))
    page.click("#trace-upload button[type=submit]")
    page.wait_for_selector("#trace-ui-trace .trace-figures [data-figure-id] .main-svg")
    page.goto(f"{stack.base_url}/jobs/new?kind=capacity")
    page.select_option("select[name='capacity.trace.stored']", "ui-trace")
    page.click("#start-job")
    page.wait_for_url(lambda url: "/jobs/" in url and "/new" not in url)
    job = BenchmarkJob.objects.get(kind="capacity")
    assert job.trace_sources["trace"]["trace"] == "ui-trace" and len(job.params["trace"]) == 40
    done = wait_until(
        lambda: BenchmarkJob.objects.filter(pk=job.pk, status__in=("done", "failed")).first(),
        timeout=120,
        what="the capacity job to finish",
    )
    assert done.status == "done", (done.error, stack.worker_log()[-3000:])
    page.reload()
    page.wait_for_function("document.getElementById('figures').dataset.loaded")
    # Figures further down are drawn as they come near or once the page is idle (figures.js).
    page.wait_for_function("document.querySelectorAll('#figures [data-figure-id] .main-svg').length >= 3")
    assert page.locator("#trace-sources").inner_text().count("ui-trace") == 1
    page.screenshot(path="/tmp/i19web-capacity-on-trace.png", full_page=True)
