"""The figures API, the exports and the synchronous plan, over HTTP with a logged-in user."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import subprocess
import sys

import pytest

from heliosweb.figures import registry
from heliosweb.figures.palette import capacity_colour
from scheduler_core.policies import selectable_policies

from .conftest import ROOT
from .runs import finished, store


@pytest.fixture
def client_in(client, viewer):
    client.force_login(viewer)
    return client


def test_figures_lists_id_title_and_a_plotly_figure_with_its_growth(client_in):
    job = store("pulse")
    answer = client_in.get(f"/api/jobs/{job.pk}/figures/").json()
    assert [(f["id"], f["title"]) for f in answer] == [("events", "Events")]
    assert answer[0]["seq"] == job.last_seq
    assert answer[0]["growth"] == [
        {
            "event": "measurement",
            "figure": "events",
            "x": "i",
            "y": "elapsed_s",
            "trace": 0,
            "trace_field": None,
            "max_points": 5000,
        }
    ]
    assert len(answer[0]["figure"]["data"][0]["x"]) == 20


def test_a_finished_jobs_figures_are_built_once_and_a_running_jobs_every_time(client_in, monkeypatch):
    """The figures cache: the builders run once for a finished job; a running job, and a job that
    changed (it finished, it has another event), are built afresh."""
    builds: list[int] = []
    views = registry.views_for("pulse")

    def counted(job):
        builds.append(job.id)
        return views.figures(job)

    monkeypatch.setitem(registry.VIEWS, "pulse", dataclasses.replace(views, figures=counted))
    job = store("pulse", status="running")
    url = f"/api/jobs/{job.pk}/figures/"
    running = [client_in.get(url).json() for _ in range(2)]
    assert len(builds) == 2 and running[0] == running[1]

    job.status, job.result = "done", finished("pulse")[1]
    job.finished_at = job.started_at = job.created_at
    job.save()
    done = [client_in.get(url).content for _ in range(3)]
    assert len(builds) == 3 and done[0] == done[1] == done[2]
    assert json.loads(done[0])[0]["seq"] == job.last_seq

    job.last_seq += 1  # the job changed after it was kept: another key, built afresh
    job.save()
    assert json.loads(client_in.get(url).content)[0]["seq"] == job.last_seq
    assert len(builds) == 4


def test_figures_of_an_unknown_job_answer_404_naming_the_id(client_in):
    response = client_in.get("/api/jobs/999/figures/")
    assert response.status_code == 404 and response.json()["field"] == "id"


def test_each_result_table_downloads_as_csv_with_a_header(client_in):
    job = store("simulate")
    response = client_in.get(f"/api/jobs/{job.pk}/table.csv?table=requests")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    params = finished("simulate")[0]
    assert len(rows) == len(params["policies"]) * params["requests"]
    assert {"policy", "ttft_ms", "prompt_tokens"} <= set(rows[0])
    first = client_in.get(f"/api/jobs/{job.pk}/table.csv")
    assert next(csv.reader(io.StringIO(first.content.decode())))[0] == "policy"
    missing = client_in.get(f"/api/jobs/{job.pk}/table.csv?table=nope")
    assert missing.status_code == 404 and missing.json()["field"] == "table"


def _check_trace(trace: dict) -> list[dict]:
    """The Chrome trace event format's rules this export promises; returns the launches."""
    events = trace["traceEvents"]
    for e in events:
        assert {"ph", "ts", "pid", "tid"} <= set(e)
    complete = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] >= 0 for e in complete) and {e["cat"] for e in complete} <= {"launch", "request"}
    assert all({"graph", "predicted_ms"} <= set(e["args"]) for e in complete if e["cat"] == "launch")
    names = {(e["name"], e["pid"], e["tid"]) for e in events if e["ph"] == "M"}
    assert {pid for _, pid, _ in names} == {e["pid"] for e in complete}
    assert {("thread_name", e["pid"], e["tid"]) for e in complete} <= names
    flows: dict[int, list[str]] = {}
    for e in events:
        if e["ph"] in "stf":
            flows.setdefault(e["id"], []).append(e["ph"])
    for phases in flows.values():
        assert phases[0] == "s" and phases[-1] == "f" and set(phases[1:-1]) <= {"t"}
    return [e for e in complete if e["cat"] == "launch"]


def test_simulate_trace_has_a_launch_per_recorded_launch_and_flows_per_request(client_in):
    job = store("simulate")
    trace = client_in.get(f"/api/jobs/{job.pk}/trace.json").json()
    complete = _check_trace(trace)
    _, result, events = finished("simulate")
    # Every request of each policy is a slice (arrival to last token) holding its wait for the first token.
    pids = {e["args"]["name"]: e["pid"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    for policy in result["policies"]:
        mine = [e for e in trace["traceEvents"] if e.get("cat") == "request" and e["pid"] == pids[policy["policy"]]]
        whole = {e["args"]["id"]: e for e in mine if e["name"].startswith("request ")}
        assert sorted(whole) == sorted(r["id"] for r in policy["per_request"])
        for r in policy["per_request"]:
            assert whole[r["id"]]["dur"] == pytest.approx((r["finish_ms"] - r["arrival_ms"]) * 1000, abs=1e-2)
        assert len(mine) == 2 * len(whole)
        held = trace["otherData"]["policies"][policy["policy"]]
        assert held["requests_in_trace"] == held["requests"] == len(whole) and not held["requests_truncated"]
    launches = [e for e in events if e["type"] == "launch"]
    assert len(complete) == len(launches)
    for event, launch in zip(complete, launches):
        assert event["ts"] == pytest.approx(launch["start_ms"] * 1000, abs=1e-3)
        assert event["dur"] == pytest.approx((launch["end_ms"] - launch["start_ms"]) * 1000, abs=1e-3)
    assert any(e["ph"] == "s" for e in trace["traceEvents"]), "a request with two launches has a flow"
    processes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert processes == set(selectable_policies())  # the policies the run compared


def test_a_simulate_trace_past_its_request_cap_keeps_the_first_by_arrival_and_says_so(client_in, monkeypatch):
    from heliosweb.figures import simulate

    monkeypatch.setattr(simulate, "TRACE_REQUESTS", 5)
    job = store("simulate")
    trace = client_in.get(f"/api/jobs/{job.pk}/trace.json").json()
    first = sorted(job.result["policies"][0]["per_request"], key=lambda r: r["arrival_ms"])[:5]
    pid = next(e["pid"] for e in trace["traceEvents"] if e["name"] == "process_name" and e["args"]["name"] == "cost")
    held = [e["args"]["id"] for e in trace["traceEvents"] if e.get("cat") == "request" and e["pid"] == pid]
    assert sorted(set(held)) == sorted(r["id"] for r in first)
    cost = trace["otherData"]["policies"]["cost"]
    assert cost["requests_truncated"] and cost["requests_in_trace"] == 5 < cost["requests"]
    assert "5 per policy" in trace["otherData"]["note"]


def test_pr22_trace_matches_the_result_launch_for_launch(client_in):
    job = store("pr22")
    complete = _check_trace(client_in.get(f"/api/jobs/{job.pk}/trace.json").json())
    chunks = [c for a in job.result["arms"] for p in ("cost", "rule") for c in a[p]["chunks"]]
    assert [(e["args"]["graph"], e["args"]["tokens"]) for e in complete] == [
        (c["graph"], [c["start"], c["end"]]) for c in chunks
    ]


def test_a_kind_without_launches_has_no_trace(client_in):
    job = store("boots")
    response = client_in.get(f"/api/jobs/{job.pk}/trace.json")
    assert response.status_code == 404 and set(response.json()) == {"error", "field"}


PLAN = {
    "policies": ["cost", "rule"],
    "catalog": [{"prefill": c, "decode": 0, "ms": 2 + c / 64} for c in (64, 128, 256, 512, 1024, 2048, 4096)],
    "request": {"prompt_tokens": 3504, "atomic_spans": [[3000, 3400]]},
    "execution": {"fixed_ms": 2.0, "ms_per_token": 0.015625, "first_token_ms": 0.1},
}


def test_plan_answers_as_the_cli_does(client_in):
    response = client_in.post("/api/plan/", PLAN, content_type="application/json")
    cli = subprocess.run(
        [sys.executable, "-m", "scheduler_core", "plan"],
        input=json.dumps(PLAN),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert response.status_code == 200 and response.json() == json.loads(cli.stdout)


def test_plan_refuses_bad_input_naming_the_field_as_the_cli_does(client_in):
    bad = {**PLAN, "request": {"prompt_tokens": 3504, "atomic_spans": [[10, 9000]]}}
    response = client_in.post("/api/plan/", bad, content_type="application/json")
    cli = subprocess.run(
        [sys.executable, "-m", "scheduler_core", "plan"],
        input=json.dumps(bad),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert response.status_code == 400
    assert cli.returncode == 2 and cli.stderr.strip() == f"error: {response.json()['error']}"
    assert response.json()["field"].startswith("request.atomic_spans")


def test_explain_draws_both_policies_plans_one_above_the_other(client_in):
    response = client_in.get("/explain", {"prompt_tokens": "3504", "catalog": "drift"})
    assert response.status_code == 200
    [figure] = json.loads(response.context["figures_json"])
    rows = {y for t in figure["figure"]["data"] for y in t["y"]}
    assert rows == set(selectable_policies())
    plans = response.context["plans"]
    launches = {p["policy"]: p["launch_count"] for p in plans}
    assert (launches["cost"], launches["rule"]) == (3, 1)  # the pull request's 3.5k drift arm
    graph_4096 = next(t for t in figure["figure"]["data"] if t["name"] == "graph 4096")
    assert graph_4096["marker"]["color"] == capacity_colour(4096)


def test_explain_names_the_bad_field_and_stores_nothing(client_in):
    from heliosweb.jobs.models import BenchmarkJob

    response = client_in.get("/explain", {"prompt_tokens": "3504", "atomic_spans": "10-9000"})
    assert response.status_code == 400
    assert any(f.startswith("request.atomic_spans") for f in response.context["errors"])
    assert not BenchmarkJob.objects.exists()
    assert client_in.get("/explain", {"prompt_tokens": "lots"}).context["errors"] == {
        "prompt_tokens": "must be whole numbers separated by commas, got 'lots'"
    }


def test_a_sweep_point_opens_explain_with_that_jobs_catalog(client_in):
    job = store("sweep")
    response = client_in.get("/explain", {"job": job.pk, "catalog": "drift", "prompt_tokens": "14000"})
    assert response.status_code == 200
    sweep = job.result
    i = sweep["prompt_tokens"].index(min(sweep["prompt_tokens"], key=lambda n: abs(n - 14000)))
    n = sweep["prompt_tokens"][i]
    response = client_in.get("/explain", {"job": job.pk, "catalog": "drift", "prompt_tokens": str(n)})
    ttft = {p["policy"]: p["ttft_ms"] for p in response.context["plans"]}
    assert ttft["rule"] == pytest.approx(sweep["series"]["drift"]["rule"]["ttft_ms"][i])
    assert ttft["cost"] == pytest.approx(sweep["series"]["drift"]["cost"]["ttft_ms"][i])


@pytest.mark.parametrize("kind", ["pr22", "simulate", "capture", "numerics"])
def test_the_job_page_offers_its_downloads(client_in, kind):
    job = store(kind)
    html = client_in.get(f"/jobs/{job.pk}").content.decode()
    assert f"/api/jobs/{job.pk}/table.csv?table=" in html
    assert (f"/api/jobs/{job.pk}/trace.json" in html) == (kind in ("pr22", "simulate"))


def test_compare_overlays_jobs_of_one_kind_with_a_trace_group_per_job(client_in):
    a, b = store("boots"), store("boots")
    response = client_in.get("/compare", {"ids": f"{a.pk},{b.pk}"})
    figures = json.loads(response.context["figures_json"])
    distinct = next(f for f in figures if f["id"] == "boots-distinct")
    assert [t["name"] for t in distinct["figure"]["data"]] == [
        f"#{job.pk} {policy}" for job in (a, b) for policy in selectable_policies()
    ]


def test_compare_keeps_each_job_s_own_summary_and_reads_a_gapped_line_as_numbers(client_in):
    """An overlay says what each job's figure said (`#id: ...`), and a line's gaps (None between its
    segments, as the requests timeline draws) are not read as category labels."""
    a, b = store("simulate"), store("simulate")
    response = client_in.get("/compare", {"ids": f"{a.pk},{b.pk}"})
    figures = {f["id"]: f for f in json.loads(response.context["figures_json"])}
    timeline = figures["simulate-requests-cost"]["summary"]
    assert timeline.startswith(f"#{a.pk}: ") and f" #{b.pk}: " in timeline and "categories" not in timeline
    # its filled rows (no line to dash) tell the jobs apart by opacity: the later job's paler
    drawn = figures["simulate-requests-cost"]["figure"]["data"]
    assert [(t["legendgroup"], t["opacity"]) for t in drawn] == [(f"#{a.pk}", 1.0)] * 2 + [(f"#{b.pk}", 0.5)] * 2
    from heliosweb.figures.summary import describe

    gapped = [{"type": "scatter", "name": "line", "x": [1.5, 9.0, None, 3.0, 4.0, None], "y": [0, 0, None, 1, 1, None]}]
    assert describe(gapped, {}) == "1 series: line (6 points); x: 1.5 to 9; y: 0 to 1."


def test_plan_agrees_with_the_cli_on_the_pull_requests_arms_and_random_cases(client_in):
    import random

    from scheduler_core.analyses.catalogs import pr22_catalogs
    from scheduler_core.analyses.fuzz import random_case
    from scheduler_core.execution import AffineExecution

    execution = AffineExecution()
    questions = [
        {
            "policies": ["cost", "rule"],
            "catalog": catalog.to_dicts(),
            "request": {"prompt_tokens": tokens},
            "execution": execution.to_dict(),
        }
        for catalog in pr22_catalogs(execution, 1.6).values()
        for tokens in (3504, 14000)
    ]
    rng = random.Random(10)
    for _ in range(25):
        case = random_case(rng, 3000)
        questions.append(
            {"policies": ["cost", "rule", "rule-v1"], "catalog": list(case.catalog), "request": case.request}
        )
    cli = subprocess.run(
        [sys.executable, "-m", "scheduler_core", "plan"],
        input="\n".join(json.dumps(q) for q in questions),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    answers = [json.loads(line) for line in cli.stdout.splitlines()]
    assert len(answers) == len(questions)
    for question, expected in zip(questions, answers):
        response = client_in.post("/api/plan/", question, content_type="application/json")
        assert response.status_code == 200 and response.json() == expected


def test_compare_shows_the_head_of_each_result_as_indented_json(client_in):
    a, b = store("simulate", raw={"requests": 120}), store("simulate")
    columns = client_in.get("/compare", {"ids": f"{a.pk},{b.pk}"}).context["columns"]
    a.refresh_from_db()  # as stored: PostgreSQL's jsonb keeps its own key order
    whole = json.dumps(a.result, indent=2)
    assert len(whole) > 20_000 and columns[0]["result_json"] == whole[:20_000]
