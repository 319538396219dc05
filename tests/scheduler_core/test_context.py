"""Execution that follows context: a prefill chunk costs by the tokens cached before it, a decode
step by its rows' contexts, the step loop hands both to the model, and a request longer than a
profile's context is clipped and counted."""

import csv
import json
import statistics
from pathlib import Path

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import AffineExecution, AttentionTerm, TableExecution, measured_catalog, parse_execution
from scheduler_core.planner import plan
from scheduler_core.policies import selectable_policies
from scheduler_core.profiles import load_profile
from scheduler_core.request import Request, fit_context
from scheduler_core.scheduler import Arrival, SchedulerConfig, schedule
from scheduler_core.traffic import TrafficShape, parse_trace, poisson_arrivals

DATA = Path(__file__).resolve().parents[2] / "scheduler_core" / "profiles" / "llama-2-7b"
DECODE_ROWS = (1, 4, 8, 16)
A100 = load_profile("llama-2-7b-a100")
H100 = load_profile("llama-2-7b-h100")
PROFILE_CATALOG = measured_catalog(A100, decode_rows=DECODE_ROWS)
TERM = AttentionTerm(prefill_key_ms=1e-5, decode_key_ms=1e-3)
AFFINE = AffineExecution(2.0, 1 / 64, 0.1, TERM)
AFFINE_CATALOG = measured_catalog(AFFINE, decode_rows=DECODE_ROWS)


def samples(kind: str) -> list[tuple[int, int, int, float]]:
    """(chunk, kv, batch, one pass's ms) of the A100 attention samples with tokens cached."""
    with open(DATA / "a100-attention-samples.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return [
        (int(r["chunk"]), int(r["kv"]), int(r["batch"]), 32 * float(r["median_ms"]))
        for r in rows
        if r["kind"] == kind and r["kv"] != ("0" if kind == "prefill" else "2048")
    ]


@pytest.mark.parametrize("profile", [A100, H100], ids=lambda p: p.name)
def test_a_decode_step_costs_more_as_its_rows_context_grows(profile):
    for rows in (1, 8, 64):
        costs = [profile.launch_ms(0, rows, context=rows * per_row) for per_row in (32, 512, 1220, 2048, 4000)]
        assert costs == sorted(costs) and len(set(costs)) == len(costs)
        # the catalog's reference (no context given) is 2,048 keys a row, as the decode table was sampled
        assert profile.launch_ms(0, rows, context=rows * 2048) == pytest.approx(profile.launch_ms(0, rows))
    # a mixed launch's decode rows follow their context too, its prefill row its cached tokens
    assert A100.launch_ms(512, 8, 0, 8 * 3000) > A100.launch_ms(512, 8, 0, 8 * 300)


@pytest.mark.parametrize("profile", [A100, H100], ids=lambda p: p.name)
def test_a_prefill_chunk_costs_more_with_more_tokens_cached(profile):
    for chunk in (64, 512, 1024, 2048):
        costs = [profile.launch_ms(chunk, 0, cached) for cached in (0, 256, 1000, 2047, 4096 - chunk)]
        assert costs == sorted(costs) and len(set(costs)) == len(costs)


def test_the_profiles_context_terms_follow_vidurs_samples():
    """Median relative error over the samples at other contexts than the tables were read at."""
    prefill = [(A100.prefill_attention_ms(n, kv) - ms) / ms for n, kv, _, ms in samples("prefill")]
    decode = [(A100.decode_attention_ms(b, b * kv) - ms) / ms for _, kv, b, ms in samples("decode") if b <= 64]
    assert len(prefill) == 51 and len(decode) == 17
    assert statistics.median(abs(e) for e in prefill) < 0.06
    assert statistics.median(abs(e) for e in decode) < 0.04
    # the point the issue names: a 992-token chunk after 2,048 cached, 0.486 ms a layer in Vidur's samples
    assert A100.prefill_attention_ms(992, 2048) == pytest.approx(32 * 0.486, rel=0.05)


def test_the_step_loop_costs_each_decode_launch_at_its_lanes_context():
    """One lane: every gap is a decode launch of one row attending its prompt and the tokens so far."""
    prompt, output = 1000, 6
    result = schedule([Arrival(0, 0.0, Request(prompt), output)], AFFINE_CATALOG, AFFINE)
    expected = [2.0 + 1 / 64 + (prompt + t) * TERM.decode_key_ms for t in range(1, output)]
    assert list(result.itl_ms) == pytest.approx(expected, rel=1e-12)
    assert expected[-1] > expected[0]  # the longer the context, the longer the step


def test_the_step_loop_costs_each_chunk_after_the_tokens_before_it():
    request = Request(9000)
    result = schedule([Arrival(0, 0.0, request, 1)], AFFINE_CATALOG, AFFINE)
    (lane,) = result.lanes
    assert [c.start for c in lane.chunks][1:]  # several chunks, the later ones after cached tokens
    by_hand = sum(2.0 + c.graph / 64 + c.graph * c.start * TERM.prefill_key_ms for c in lane.chunks)
    assert lane.ttft_ms == pytest.approx(2.0 + by_hand + 0.1, rel=1e-12)  # init + chunks + first token
    assert lane.ttft_ms == pytest.approx(2.0 + plan("rule", AFFINE_CATALOG, request, AFFINE).ttft_ms, rel=1e-12)
    no_term = schedule([Arrival(0, 0.0, request, 1)], AFFINE_CATALOG, AffineExecution(2.0, 1 / 64, 0.1))
    assert no_term.lanes[0].ttft_ms < lane.ttft_ms


@pytest.mark.parametrize("execution", [A100, AFFINE], ids=["profile", "affine"])
def test_runs_of_decode_launches_cost_each_launch_at_its_own_context(execution):
    """The loop's shortcut over runs of decode launches gives what launch-by-launch stepping gives."""
    catalog = measured_catalog(execution, decode_rows=DECODE_ROWS)
    shape = TrafficShape(rate_per_s=4.0, prompt_min=100, prompt_max=3000, output_min=1, output_max=300, seed=3)
    arrivals = [a for _, a in zip(range(120), poisson_arrivals(shape, catalog.full_chunk))]
    fast = schedule(arrivals, catalog, execution, SchedulerConfig("cost"))
    stepped = schedule(arrivals, catalog, execution, SchedulerConfig("cost", trace_limit=10**6))
    assert fast.lanes == stepped.lanes and list(fast.itl_ms) == list(stepped.itl_ms)
    assert fast.end_ms == stepped.end_ms


def test_a_request_longer_than_the_profiles_context_is_clipped_and_counted():
    arrivals = [
        Arrival(0, 0.0, Request(14050), 100),  # the trace's longest prompt: 3,996 tokens prefilled
        Arrival(1, 0.0, Request(10), 5000),  # output alone over the context: 4,095 tokens, 1 prompt token
        Arrival(2, 0.0, Request(2000), 100),  # fits
    ]
    result = schedule(arrivals, PROFILE_CATALOG, A100)
    assert result.clipped == 2
    lanes = {lane.id: lane for lane in result.lanes}
    assert lanes[0].chunks[-1].end == 4096 - 100 and lanes[0].tokens == 100
    assert lanes[1].chunks[-1].end == 1 and lanes[1].tokens == 4095
    assert lanes[2].chunks[-1].end == 2000 and lanes[2].tokens == 100
    assert schedule(arrivals, AFFINE_CATALOG, AFFINE).clipped == 0  # no context bound: nothing clipped


def test_fit_context_keeps_a_request_that_fits_and_lets_the_prompt_give_way():
    fits = Request(3000)
    assert fit_context(fits, 1096, 4096) == (fits, 1096) and fit_context(fits, 1096, 4096)[0] is fits
    clipped, output = fit_context(Request(5000, prefill_limit=4500), 200, 4096)
    assert (clipped.plan_end, output) == (3896, 200)
    with_span, _ = fit_context(Request(5000, (), ((3800, 4000),)), 100, 4096)
    assert with_span.plan_end == 3800  # cut back to the span's start, never through it


def test_simulate_says_how_many_requests_it_clipped():
    trace = parse_trace(
        "\n".join(
            json.dumps({"arrival_ms": i * 1000.0, "prompt_tokens": p, "output_tokens": 20})
            for i, p in enumerate((14050, 500, 4090))
        )
    )
    simulate = ANALYSES["simulate"]
    result = simulate.run(simulate.validate({"trace": trace, "execution": "llama-2-7b-a100"}), lambda e: None)
    assert [p["clipped_requests"] for p in result["policies"]] == [2] * len(selectable_policies())
    affine = simulate.run(simulate.validate({"trace": trace}), lambda e: None)
    assert [p["clipped_requests"] for p in affine["policies"]] == [0] * len(selectable_policies())


def test_the_attention_term_is_declared_for_affine_and_table_models():
    affine = parse_execution(
        {"fixed_ms": 1, "ms_per_token": 0.5, "first_token_ms": 0, "prefill_key_ms": 2e-6, "decode_key_ms": 1e-4}
    )
    assert affine == AffineExecution(1.0, 0.5, 0.0, AttentionTerm(2e-6, 1e-4)) and affine.follows_context
    assert affine.launch_ms(64, 0, 1000) == pytest.approx(1 + 32 + 64 * 1000 * 2e-6)
    assert affine.launch_ms(0, 4, 0, 4 * 500) == pytest.approx(1 + 2 + 2000 * 1e-4)
    assert affine.launch_ms(0, 4) == 3.0  # no context given: the term adds nothing
    assert AffineExecution.parse(affine.to_dict()) == affine
    assert AffineExecution().to_dict() == {"fixed_ms": 2.0, "ms_per_token": 1 / 64, "first_token_ms": 0.1}
    assert not AffineExecution().follows_context
    table = parse_execution({"table": [{"prefill": 64, "decode": 0, "ms": 4.5}], "decode_key_ms": 1e-4})
    assert isinstance(table, TableExecution) and table.launch_ms(64, 0, 100) == 4.5
    boot = TableExecution.from_catalog(AFFINE_CATALOG, 0.1, AttentionTerm(prefill_key_ms=1e-5))
    assert boot.launch_ms(64, 0, 1000) == pytest.approx(AFFINE_CATALOG.graph(64, 0).ms + 64 * 1000 * 1e-5)


@pytest.mark.parametrize("key", ["prefill_key_ms", "decode_key_ms"])
@pytest.mark.parametrize("value", [-1e-6, "fast", float("inf")])
def test_a_bad_attention_coefficient_names_its_field(key, value):
    with pytest.raises(InvalidInput) as excinfo:
        parse_execution({"fixed_ms": 1, "ms_per_token": 0.5, "first_token_ms": 0, key: value})
    assert excinfo.value.field == f"execution.{key}"
