"""Counterfactual replay from the web: what an engine posted is read back over a window, replayed
under every policy as a `replay` job, and the job's result is readable, drawn and citable; bad
input is refused naming its field, and nothing is stored or queued then."""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from heliosweb.decisions import services as decisions
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.jobs.services import runner
from heliosweb.telemetry.replay import MAX_REQUESTS
from scheduler_core.policies import selectable_policies

from .conftest import grant
from .telemetry_records import body, engine_served
from .test_decisions import RATIONALE


@pytest.fixture
def window() -> dict[str, float]:
    """The last two minutes, read when the test starts: batches are looked up by when they were
    received, at most a minute after the window's end (`selectors.raw_records`)."""
    now = time.time() * 1000
    return {"since_ms": now - 121_000, "until_ms": now}


@pytest.fixture
def engine(recipe) -> Client:
    out = StringIO()
    call_command("create_api_token", engine="eng-1", recipes="tiny-cpu", stdout=out)
    return Client(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")


@pytest.fixture
def served(engine, window) -> list[dict]:
    """40 requests the simulated engine's loop served under cost (v1) in the window, posted in two batches."""
    records = engine_served("cost", 40, start_ms=window["since_ms"] + 1_000)
    for batch, part in enumerate((records[:25], records[25:]), start=1):
        answer = engine.post("/api/recipes/tiny-cpu/telemetry/", body(part, batch), content_type="application/json")
        assert answer.status_code == 201, answer.content
    return records


@pytest.fixture
def client(maintainer) -> Client:
    c = Client()
    c.force_login(maintainer)
    return c


def replay(client: Client, **data):
    return client.post("/api/recipes/tiny-cpu/replay/", data, content_type="application/json")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (lambda w: {"until_ms": w["until_ms"]}, "since_ms"),
        (lambda w: {**w, "since_ms": "yesterday"}, "since_ms"),
        (lambda w: {**w, "since_ms": w["since_ms"] / 1000}, "since_ms"),  # Unix seconds, not ms
        (lambda w: {**w, "since_ms": w["until_ms"] - 25 * 3_600_000}, "until_ms"),  # longer than the raw window
        (lambda w: {**w, "until_ms": w["since_ms"] - 1}, "until_ms"),  # ends before it starts
        (lambda w: {**w, "engine": "eng 1"}, "engine"),
        (lambda w: {**w, "execution": "h100-please"}, "execution"),
        (lambda w: {**w, "execution": "boot"}, "execution"),  # the recipe has no stored boot
        (lambda w: {**w, "execution": "affine", "engine": "eng-2"}, "since_ms"),  # no request of that engine
        (
            lambda w: {"since_ms": w["since_ms"] - 3_600_000, "until_ms": w["since_ms"], "execution": "affine"},
            "since_ms",
        ),
        (lambda w: {**w, "policies": ["cost"]}, "policies"),  # not a field of this endpoint
    ],
)
def test_a_bad_replay_is_refused_naming_its_field_and_nothing_is_stored(
    client, served, queued, window, data, field, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        answer = replay(client, **data(window))
    assert callbacks == []
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field, answer.json()
    assert answer.json()["error"]
    assert not BenchmarkJob.objects.filter(kind="replay").exists() and queued == []


def test_a_window_holding_more_requests_than_the_bound_is_refused(client, served, queued, window, monkeypatch):
    monkeypatch.setattr("heliosweb.telemetry.replay.MAX_REQUESTS", 39)
    answer = replay(client, **window, execution="affine")
    assert (answer.status_code, answer.json()["field"]) == (400, "since_ms")
    assert "more than 39 finished requests" in answer.json()["error"]
    assert not BenchmarkJob.objects.filter(kind="replay").exists() and queued == []
    assert MAX_REQUESTS == 20_000


def test_a_viewer_may_not_start_a_replay(viewer, served, queued, window):
    c = Client()
    c.force_login(viewer)
    assert replay(c, **window, execution="affine").status_code == 403
    assert queued == []


def test_the_engine_s_requests_replayed_under_every_policy_repeat_what_it_served_and_can_be_cited(
    transactional_db, client, served, queued, author, window
):
    answer = replay(client, **window, engine="eng-1", execution="affine")
    assert answer.status_code == 201, answer.content
    job_id = answer.json()["id"]
    assert answer.json()["requests"] == len(served) and queued == [(job_id, "sim")]
    job = BenchmarkJob.objects.get(pk=job_id)
    assert job.trace_sources["trace"] | {"window_utc": ""} == {
        "telemetry": "tiny-cpu",
        "engine": "eng-1",
        "since_ms": window["since_ms"],
        "until_ms": window["until_ms"],
        "window_utc": "",
        "requests": 40,
        "execution": "affine",
    }
    # the job keeps the requests themselves: arrivals rebuilt from each record, served as reported
    assert len(job.params["trace"]) == len(job.params["served"]) == 40
    runner.job_run(job_id=job_id)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE, job.error

    detail = client.get(f"/api/jobs/{job_id}/").json()
    result = detail["result"]
    assert [row["policy"] for row in result["table"]] == list(selectable_policies())
    assert result["deterministic"] is True
    assert result["reproduction"] == [
        {
            "policy": "cost",
            "requests": 40,
            "same_launches": 40,
            "same_launches_share": 1.0,
            # times on the Unix clock (1.8e12 ms) hold about 0.25 microseconds: the gap is that rounding
            "ttft_max_gap_ms": pytest.approx(0, abs=1e-3),
        }
    ]
    (as_served,) = result["served"]["policies"]
    assert as_served["prefill_launches"] == sum(len(r["launches"]) for r in served)
    assert as_served["padded_prefill_tokens"] == sum(sum(r["launches"]) - r["prompt_tokens"] for r in served)
    assert result["served"]["engines"] == ["eng-1"]
    assert "replayed cost repeats the engine's launches for 40/40 requests" in detail["summary"]

    figures = client.get(f"/api/jobs/{job_id}/figures/").json()
    assert [f["id"] for f in figures][:2] == ["comparison", "ttft-cdf"]
    assert "served cost: TTFT p50" in figures[0]["summary"]
    assert "repeats the engine's launches for 40 of 40 requests" in figures[0]["summary"]

    decision = decisions.decision_propose(
        actor=grant(author, "propose_decision"),
        recipe="tiny-cpu",
        policy="rule",
        rationale=RATIONALE,
        evidence=[job_id],
    )
    assert list(decision.evidence.values_list("pk", flat=True)) == [job_id]
    page = client.get(f"/decisions/{decision.pk}")
    assert page.status_code == 200 and f'href="/jobs/{job_id}"' in page.content.decode()
    # the trade-off: each policy replayed beside what the engine served, whose traffic and when
    html = page.content.decode()
    table = html.split('<table class="replay"')[1].split("</table>")[0]
    for row in result["table"]:
        cells = table.split(f'data-policy="{row["policy"]}"')[1].split("</tr>")[0]
        assert f"{row['ttft_p50_ms']:.2f} ms" in cells and f"{row['ttft_p99_ms']:.2f} ms" in cells
        assert f'class="launches">{row["prefill_launches"]}<' in cells
        assert f'class="padding">{row["padded_prefill_tokens"]}<' in cells
    assert "40 of 40 requests (100 %)" in table.split('data-policy="cost"')[1].split("</tr>")[0]
    as_served_row = table.split('data-served="cost"')[1].split("</tr>")[0]
    assert f'class="launches">{as_served["prefill_launches"]}<' in as_served_row and "cost, as served" in as_served_row
    source = html.split('class="replay-source"')[1].split("</p>")[0]
    assert "what engine eng-1 served on tiny-cpu from" in source and "UTC (replayed on affine)" in source
    assert "deterministic" in html.split('class="replay-delta"')[1].split("</p>")[0]
    # the serving job's same requests, the 20 worst each opening /explain on the job's catalog
    assert "replay: 40 requests" in html.split('class="requests-summary"')[1].split("</p>")[0]
    worst = html.split('class="worst"')[1].split("</table>")[0].split("<tr data-request=")[1:]
    top = result["deltas"]["worst"][0]
    link = f"/explain?job={job_id}&amp;catalog=clean&amp;prompt_tokens={top['prompt_tokens']}"
    assert len(worst) == 20 and link in worst[0]
    explained = client.get(link.replace("&amp;", "&"))
    assert explained.status_code == 200 and f"job #{job_id}&#x27;s clean catalog" in explained.content.decode()
    tradeoff = client.get(f"/api/decisions/{decision.pk}/tradeoff/").json()
    assert tradeoff["replay"][0]["telemetry"] | {"window_utc": ""} == {
        "telemetry": "tiny-cpu",
        "engine": "eng-1",
        "window_utc": "",
        "execution": "affine",
    }
    assert tradeoff["requests"][0]["kind"] == "replay" and tradeoff["replay"][0]["engines"] == ["eng-1"]


def test_the_live_page_offers_the_replay_and_its_form_queues_the_job(client, served, queued):
    page = client.get("/recipes/tiny-cpu/live").content.decode()
    assert 'id="replay-form"' in page and "<option>eng-1</option>" in page
    assert "<option>boot</option>" not in page  # no stored boot: not offered
    answer = client.post("/recipes/tiny-cpu/live/replay", {"window_min": "5", "engine": "", "execution": "affine"})
    job = BenchmarkJob.objects.get(kind="replay")
    assert answer.status_code == 302 and answer["Location"] == f"/jobs/{job.pk}"
    assert job.trace_sources["trace"]["engine"] == "all"
    refused = client.post("/recipes/tiny-cpu/live/replay", {"window_min": "7", "engine": "", "execution": "affine"})
    assert refused.status_code == 400 and 'data-field="window_min"' in refused.content.decode()
    assert BenchmarkJob.objects.filter(kind="replay").count() == 1


def test_the_live_page_says_why_a_viewer_gets_no_replay_form_and_when_none_has_run(recipe, viewer):
    c = Client()
    c.force_login(viewer)
    page = c.get("/recipes/tiny-cpu/live").content.decode()
    assert 'id="replay-form"' not in page and 'id="replay-needs-permission"' in page
    assert 'id="replay-none"' in page and 'id="replay-latest"' not in page


def test_a_replay_on_the_recipe_s_boot_keeps_the_boot_it_ran_on(
    transactional_db, client, served, recipe, window, author
):
    from heliosweb.catalogs.services import boot_create
    from scheduler_core.analyses.simulate import DECODE_ROWS
    from scheduler_core.execution import AffineExecution, measured_catalog

    catalog = measured_catalog(AffineExecution(), decode_rows=DECODE_ROWS, mixed=((1024, 8),))
    boot = boot_create(recipe=recipe, catalog=catalog.to_dicts(), provenance={"device": "cpu", "mode": "eager"})
    answer = replay(client, **window)  # execution: the recipe's latest boot by default
    assert answer.status_code == 201, answer.content
    job = BenchmarkJob.objects.get(pk=answer.json()["id"])
    assert job.catalog_sources == {"boot_catalog": [{"boot": boot.pk, "repaired": False}]}
    assert job.trace_sources["trace"]["execution"] == "boot"
    runner.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE, job.error
    assert job.result["catalog"] == "boot" and job.result["reproduction"][0]["requests"] == 40
    page = client.get("/recipes/tiny-cpu/live").content.decode()
    assert "<option>boot</option>" in page and f"job {job.pk}</a> (done" in page
    # cited, its worst requests open /explain planned on the boot the replay ran on
    decision = decisions.decision_propose(
        actor=grant(author, "propose_decision"),
        recipe="tiny-cpu",
        policy="rule",
        rationale=RATIONALE,
        evidence=[job.pk],
    )
    tradeoff = client.get(f"/api/decisions/{decision.pk}/tradeoff/").json()
    assert tradeoff["replay"][0]["basis"] == "a stored boot's measured durations"
    top = tradeoff["requests"][0]["worst"][0]
    assert top["explain_url"] == (
        f"/explain?job={job.pk}&catalog=job&prompt_tokens={top['prompt_tokens']}&request={top['id']}"
        "&before=cost&after=rule"  # the decision's pair: the table's delta
    )
    explained = client.get(top["explain_url"])
    assert explained.status_code == 200 and f"job #{job.pk}&#x27;s boot catalog" in explained.content.decode()
    split = explained.context["in_run"]["delta"]  # the request in its run, on the same boot
    assert split["plan_ms"] + split["own_launches_ms"] + split["waited_ms"] == pytest.approx(top["delta_ms"], abs=1e-5)
