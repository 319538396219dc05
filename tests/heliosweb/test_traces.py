"""Stored traces: uploaded once by content hash (multipart or raw), refused whole on a bad row or
an oversized body (before parsing), listed with their pictures, and chosen by name in a job."""

from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from heliosweb.audit.models import AuditEvent
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.traces import services
from heliosweb.traces.models import Trace
from scheduler_core.analyses import ANALYSES
from scheduler_core.traffic import read_trace

from .conftest import log_in_and_open, needs_chromium

AZURE = Path(__file__).resolve().parents[1] / "data" / "traces" / "azure-llm-2023-code.csv"
JSONL = "\n".join(
    f'{{"arrival_ms": {i * 250 + (i % 3) * 7}, "prompt_tokens": {100 + 37 * i}, "output_tokens": {1 + i % 5}}}'
    for i in range(40)
).encode()


@pytest.fixture
def api(maintainer, settings) -> APIClient:
    settings.HELIOS_MAX_QUEUED_JOBS_PER_USER = 10_000
    client = APIClient()
    client.force_authenticate(maintainer)
    return client


def upload_raw(api: APIClient, name: str, content: bytes, content_type: str = "text/csv"):
    return api.generic("POST", f"/api/traces/?name={name}", content, content_type=content_type)


def test_a_multipart_upload_is_stored_once_by_hash_and_audited(api):
    content = AZURE.read_bytes()
    response = api.post("/api/traces/", {"name": "azure-code", "file": SimpleUploadedFile("a.csv", content)})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["sha256"] == hashlib.sha256(content).hexdigest() and body["requests"] == 8819
    assert body["format"] == "azure-csv" and body["summary"]["prompt_tokens"]["p50"] == 1469
    again = upload_raw(api, "another-name", content)  # the same bytes, raw this time
    assert again.status_code == 200 and again.json()["name"] == "azure-code"
    assert Trace.objects.count() == 1
    event = AuditEvent.objects.get(action="trace_uploaded")
    assert event.after["sha256"] == body["sha256"] and event.after["requests"] == 8819
    stored = read_trace(str(AZURE))
    from heliosweb.traces.selectors import trace_traffic

    back = trace_traffic(Trace.objects.get())
    assert list(back.arrival_ms) == list(stored.arrival_ms) and list(back.ids) == list(stored.ids)
    assert list(back.prompt_tokens) == list(stored.prompt_tokens)
    assert list(back.output_tokens) == list(stored.output_tokens)


def test_a_raw_upload_then_the_list_and_the_detail(api):
    response = upload_raw(api, "small.jsonl", JSONL, "application/x-ndjson")
    assert response.status_code == 201, response.content
    assert response.json()["format"] == "jsonl" and response.json()["requests"] == 40
    listed = api.get("/api/traces/").json()
    assert [t["name"] for t in listed] == ["small.jsonl"] and listed[0]["summary"]["requests"] == 40
    detail = api.get("/api/traces/SMALL.jsonl/")  # names are case-insensitive
    assert detail.status_code == 200 and detail.json()["sha256"] == hashlib.sha256(JSONL).hexdigest()
    missing = api.get("/api/traces/nope/")
    assert missing.status_code == 404 and missing.json()["field"] == "name"
    taken = upload_raw(api, "Small.JSONL", JSONL + b"\n" + JSONL.splitlines()[0])
    assert taken.status_code == 409 and taken.json()["field"] == "name"
    assert Trace.objects.count() == 1


@pytest.mark.parametrize(
    "content, line, column",
    [
        (
            b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,4808,10\n2023-11-16 18:17:04.0,12,ten\n",
            3,
            "GeneratedTokens",
        ),
        (JSONL + b'\n{"arrival_ms": 5, "prompt_tokens": -1, "output_tokens": 2}', 41, "prompt_tokens"),
    ],
)
def test_a_bad_row_answers_400_with_line_and_column_and_stores_nothing(api, content, line, column):
    response = upload_raw(api, "bad", content)
    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["field"], body["line"], body["column"]) == ("file", line, column)
    assert f"line {line}, column {column}" in body["error"]
    assert not Trace.objects.exists() and not AuditEvent.objects.filter(action="trace_uploaded").exists()


def test_bad_names_empty_and_missing_files_are_refused(api):
    assert upload_raw(api, "", JSONL).json()["field"] == "name"
    assert upload_raw(api, "a%20b", JSONL).status_code == 400
    assert upload_raw(api, "empty", b"\n\n").json()["field"] == "file"
    assert api.post("/api/traces/", {"name": "x"}).json()["field"] == "file"
    assert not Trace.objects.exists()


def test_an_oversized_upload_is_refused_before_parsing(api, monkeypatch):
    monkeypatch.setattr(services, "MAX_TRACE_BYTES", 1_000)

    def never(*args, **kwargs):
        raise AssertionError("parsed an oversized upload")

    monkeypatch.setattr(services, "parse_trace", never)
    big = JSONL[:1_001]
    for response in (
        upload_raw(api, "big", big),
        api.post("/api/traces/", {"name": "big", "file": SimpleUploadedFile("b.jsonl", big)}),
    ):
        assert response.status_code == 413, response.content
        assert response.json()["field"] == "file" and "1,000" in response.json()["error"]
    # a body whose size is not declared is still read no further than the bound
    with pytest.raises(services.TooLarge):
        services.trace_upload(user=None, name="big", content=big)
    assert not Trace.objects.exists()


def figures_of(page_html: str) -> list[dict]:
    return [json.loads(html.unescape(m)) for m in re.findall(r'data-figures="([^"]*)"', page_html)]


def test_the_page_lists_traces_with_their_figures(api, client, maintainer):
    upload_raw(api, "small", JSONL)
    client.force_login(maintainer)
    response = client.get("/traces")
    assert response.status_code == 200
    text = response.content.decode()
    assert 'id="trace-small"' in text and 'enctype="multipart/form-data"' in text and 'href="/traces"' in text
    (figures,) = figures_of(text)
    assert [f["title"] for f in figures] == ["Arrivals per minute", "Prompt tokens CDF", "Output tokens CDF"]
    assert sum(figures[0]["figure"]["data"][0]["y"]) == 40  # every request in a minute bin
    prompt_cdf = figures[1]["figure"]["data"][0]["x"]
    assert prompt_cdf[0] == 100 and prompt_cdf[-1] == 100 + 37 * 39


def test_the_page_uploads_and_shows_an_error_at_the_file(client, maintainer):
    client.force_login(maintainer)
    bad = SimpleUploadedFile("bad.csv", b"TIMESTAMP,ContextTokens,GeneratedTokens\nnot-a-time,1,1\n")
    response = client.post("/traces", {"name": "bad", "file": bad})
    assert response.status_code == 400 and b'data-field="file"' in response.content
    assert b"line 2, column TIMESTAMP" in response.content and not Trace.objects.exists()
    response = client.post("/traces", {"name": "good", "file": SimpleUploadedFile("g.jsonl", JSONL)})
    assert response.status_code == 302 and Trace.objects.get().name == "good"


def test_a_viewer_reads_traces_but_cannot_upload(api, client, viewer):
    upload_raw(api, "small", JSONL)
    client.force_login(viewer)
    page = client.get("/traces")
    assert page.status_code == 200 and b'id="trace-small"' in page.content and b"trace-upload" not in page.content
    refused = client.post("/traces", {"name": "mine", "file": SimpleUploadedFile("m.jsonl", JSONL + b"\n")})
    assert refused.status_code == 403
    reader = APIClient()
    reader.force_authenticate(viewer)
    assert reader.get("/api/traces/small/").status_code == 200
    assert upload_raw(reader, "mine", JSONL + b"\n").status_code == 403
    assert list(Trace.objects.values_list("name", flat=True)) == ["small"]


def test_a_simulate_job_with_a_stored_trace_runs_on_exactly_its_requests(api):
    upload_raw(api, "azure", AZURE.read_bytes())
    response = api.post(
        "/api/jobs/", {"kind": "simulate", "params": {"trace": {"trace": "Azure"}, "limit": 300}}, format="json"
    )
    assert response.status_code == 201, response.content
    job = BenchmarkJob.objects.get()
    assert job.trace_sources == {
        "trace": {"trace": "azure", "sha256": hashlib.sha256(AZURE.read_bytes()).hexdigest(), "requests": 8819}
    }
    assert api.get(f"/api/jobs/{job.pk}/").json()["trace_sources"]["trace"]["trace"] == "azure"
    analysis = ANALYSES["simulate"]
    result = analysis.run(analysis.from_json(job.params), lambda event: None)  # what the worker runs
    file = read_trace(str(AZURE)).select(limit=300)
    expected = {i: (t, p, o) for t, p, o, i in zip(file.arrival_ms, file.prompt_tokens, file.output_tokens, file.ids)}
    for policy in result["policies"]:
        got = {r["id"]: (r["arrival_ms"], r["prompt_tokens"], r["output_tokens"]) for r in policy["per_request"]}
        assert got.keys() == expected.keys()
        for rid, (t, p, o) in expected.items():
            assert got[rid][1:] == (p, o) and got[rid][0] == pytest.approx(t, abs=1e-6)


def test_a_job_naming_an_unknown_or_too_long_trace_is_refused(api, monkeypatch):
    response = api.post("/api/jobs/", {"kind": "capacity", "params": {"trace": {"trace": "nope"}}}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "params.trace.trace"
    upload_raw(api, "small", JSONL)
    (param,) = [p for p in ANALYSES["simulate"].params if p.name == "trace"]
    monkeypatch.setitem(vars(param), "max_inline", 10)  # a frozen dataclass: its bound made small here
    response = api.post("/api/jobs/", {"kind": "simulate", "params": {"trace": {"trace": "small"}}}, format="json")
    assert response.status_code == 400 and "at most 10" in response.json()["error"]
    assert not BenchmarkJob.objects.exists()


def test_the_job_form_offers_stored_traces_by_name(api, client, maintainer, queued):
    upload_raw(api, "small", JSONL)
    client.force_login(maintainer)
    page = client.get("/jobs/new?kind=simulate").content.decode()
    assert 'name="simulate.trace.stored"' in page and '<option value="small">small</option>' in page
    response = client.post("/jobs/new", {"kind": "simulate", "simulate.trace.stored": "small"})
    assert response.status_code == 302, response.content.decode()[:2000]
    job = BenchmarkJob.objects.get()
    assert job.trace_sources["trace"]["trace"] == "small" and len(job.params["trace"]) == 40
    assert "Where the traffic came from" in client.get(f"/jobs/{job.pk}").content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_a_trace_is_uploaded_through_the_page_in_chromium(live_server, page, maintainer):
    path = AZURE
    log_in_and_open(page, f"{live_server.url}/traces", "maint", "pw-maint-123")
    page.fill("#trace-upload input[name=name]", "from-the-ui")
    page.set_input_files("#trace-upload input[name=file]", str(path))
    page.click("#trace-upload button[type=submit]")
    page.wait_for_selector("#trace-from-the-ui .trace-figures [data-figure-id] .main-svg")
    assert page.locator("#trace-from-the-ui .trace-figures [data-figure-id]").count() == 3
    assert "8,819 requests" in page.inner_text("#trace-from-the-ui h2")
    assert Trace.objects.get().name == "from-the-ui"
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.reload()
        page.wait_for_selector("#trace-from-the-ui .trace-figures [data-figure-id] .main-svg")
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # nothing wider than the screen
        page.screenshot(path=f"/tmp/i19web-traces-{width}.png", full_page=True)


def test_the_simulated_engine_replays_a_stored_trace_in_a_loop_time_scaled(api, recipe, queued):
    from heliosweb.simengine.engine import ANALYSIS, traffic

    upload_raw(api, "small", JSONL)
    params = {"trace": {"trace": "small"}, "time_scale": 2.0, "duration_s": 5}
    response = api.post("/api/jobs/", {"kind": "engine", "recipe": recipe.name, "params": params}, format="json")
    assert response.status_code == 201, response.content
    job = BenchmarkJob.objects.get()
    assert job.trace_sources["trace"]["trace"] == "small"
    stream = traffic(ANALYSIS.from_json(job.params))  # what the engine worker's loop takes
    arrivals = [next(stream) for _ in range(2 * 40)]
    file = [json.loads(line) for line in JSONL.splitlines()]
    span = 2.0 * (file[-1]["arrival_ms"] - file[0]["arrival_ms"])
    gap = span / 39
    for k, a in enumerate(arrivals):
        row = file[k % 40]
        expected = 2.0 * (row["arrival_ms"] - file[0]["arrival_ms"]) + (k // 40) * (span + gap)
        assert a.arrival_ms == pytest.approx(expected) and a.id == k
        assert (a.request.prompt_tokens, a.output_tokens) == (row["prompt_tokens"], row["output_tokens"])


def test_a_million_azure_rows_fit_the_upload_bound():
    """The shared trace cycled to 1,000,000 rows (timestamps keep their width), counted in bytes."""
    header, *rows = AZURE.read_bytes().splitlines(keepends=True)
    million = len(header) + sum(len(rows[i % len(rows)]) for i in range(1_000_000))
    assert 35_000_000 < million < services.MAX_TRACE_BYTES  # 35.3 MB, as docs/traces.md says


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("collide", ["bytes", "name"])
def test_six_concurrent_uploads_of_one_trace_store_it_once_and_answer_the_rest(maintainer, collide):
    """Issue 30: six uploads at once, of the same bytes or of different bytes under one name: one
    201; the others the stored trace (200, same bytes) or 409 (the name taken), never a 500 from
    the unique constraint the checks before the insert could not see. Both databases (CI runs the
    file with DATABASE_URL too)."""
    import threading

    from django.db import connection

    barrier, answers = threading.Barrier(6), []

    def upload(i: int) -> None:
        client = APIClient()
        client.force_authenticate(maintainer)
        body = (
            JSONL
            if collide == "bytes"
            else JSONL + f'\n{{"arrival_ms": 99999, "prompt_tokens": {i + 1}, "output_tokens": 1}}'.encode()
        )
        barrier.wait()
        try:
            answers.append(
                client.post("/api/traces/?name=raced", body, content_type="application/x-ndjson").status_code
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(answers) == sorted([201] + [200 if collide == "bytes" else 409] * 5), answers
    assert Trace.objects.filter(name="raced").count() == 1
    assert AuditEvent.objects.filter(action="trace_uploaded").count() == 1
