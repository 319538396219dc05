"""Traces: the Azure CSV and JSON Lines parsed exactly, bad rows named by line and column, the shared
trace's summary equal to figures computed here independently, and simulate driven by the file."""

import csv
import itertools
import json
import math
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.analyses.simulate import build_catalog
from scheduler_core.engine import EngineLoop
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import AffineExecution
from scheduler_core.request import Request
from scheduler_core.scheduler import Arrival, SchedulerConfig, schedule
from scheduler_core.traffic import (
    TraceError,
    TrafficShape,
    from_engine_requests,
    from_records,
    looped,
    parse_trace,
    poisson_arrivals,
    read_trace,
    summarise_trace,
)

ROOT = Path(__file__).resolve().parents[2]
AZURE = ROOT / "tests" / "data" / "traces" / "azure-llm-2023-code.csv"
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"


def azure_rows() -> list[tuple[datetime, int, int, int]]:
    """The shared trace read with csv and datetime, independently of scheduler_core: (time, prompt,
    output, data row index)."""
    with open(AZURE, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    return [
        (
            datetime.strptime(r["TIMESTAMP"][:26], "%Y-%m-%d %H:%M:%S.%f"),
            int(r["ContextTokens"]),
            int(r["GeneratedTokens"]),
            i,
        )
        for i, r in enumerate(rows)
    ]


def nearest_rank(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def test_a_byte_order_mark_is_read_past_as_bytes_text_and_lines():
    text = f"{HEADER}\r\n2023-11-16 18:17:03.9799600,4808,10\r\n"
    for source in (("\ufeff" + text).encode(), "\ufeff" + text, iter(("\ufeff" + text).splitlines(True))):
        trace = parse_trace(source)
        assert (len(trace), trace.format, trace.prompt_tokens[0], trace.output_tokens[0]) == (1, "azure-csv", 4808, 10)


def test_unsorted_rows_are_sorted_by_time_with_ids_in_file_order_and_seven_digits_kept():
    text = "\n".join(
        [
            HEADER,
            "2023-11-16 18:17:04.0000001,300,3",
            "2023-11-16 18:17:03.0000000,100,1",
            "2023-11-16 18:17:03.5000000,200,2",
            "2023-11-17 00:00:00.0000000,400,4",  # across midnight
        ]
    )
    trace = parse_trace(text)
    assert list(trace.prompt_tokens) == [100, 200, 300, 400]
    assert list(trace.ids) == [1, 2, 0, 3]
    assert list(trace.arrival_ms)[:3] == pytest.approx([0.0, 500.0, 1000.0001], abs=1e-9)
    assert trace.arrival_ms[3] == pytest.approx((24 * 3600 - 18 * 3600 - 17 * 60 - 3) * 1000.0)


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        (f"{HEADER}\n2023-11-16 18:17:03.97,4808,10\n2023-11-16 18:17:04.00,12x,10\n", 3, "ContextTokens"),
        (f"{HEADER}\n2023-11-16 18:17:03.97,4808,0\n", 2, "GeneratedTokens"),
        (f"{HEADER}\n\n2023-11-16 25:17:03.97,4808,3\n", 3, "TIMESTAMP"),
        (f"{HEADER}\n2023-02-30 01:17:03.97,4808,3\n", 2, "TIMESTAMP"),
        (f"{HEADER}\n2023-11-16 18:17:03.97,4808\n", 2, None),
        ("TIMESTAMP,Context,Generated\n2023-11-16 18:17:03.97,4808,3\n", 1, None),
        (
            '{"arrival_ms": 0, "prompt_tokens": 5, "output_tokens": 1}\n{"arrival_ms": 1, "prompt_tokens": -5, "output_tokens": 1}\n',
            2,
            "prompt_tokens",
        ),
        (
            '{"arrival_ms": 0, "prompt_tokens": 5, "output_tokens": 1}\n{"arrival_ms": NaN, "prompt_tokens": 5, "output_tokens": 1}\n',
            2,
            "arrival_ms",
        ),
        (
            '{"arrival_ms": 0, "prompt_tokens": 5, "output_tokens": 1, "atomic_spans": [[2, 9]]}\n',
            1,
            "atomic_spans[0].end",
        ),
        ('{"arrival_ms": 0, "prompt_tokens": 5, "output_tokens": 1, "colour": 1}\n', 1, "colour"),
        ('{"arrival_ms": 0, "prompt_tokens": 5}\n', 1, "output_tokens"),
        ('{"arrival_ms": 0, "prompt_tokens": 5, "output_tokens": 1}\n{"arrival_ms": 1,\n', 2, None),
    ],
)
def test_a_bad_row_is_refused_naming_its_line_and_column(text, line, column):
    with pytest.raises(TraceError) as caught:
        parse_trace(text)
    assert (caught.value.line, caught.value.column, caught.value.field) == (line, column, "trace")
    assert f"line {line}" in str(caught.value) and (column is None or f"column {column}" in str(caught.value))


@pytest.mark.parametrize("text", ["", "\n\n", "\ufeff", f"{HEADER}\n", f"\ufeff{HEADER}\r\n\r\n"])
def test_an_empty_trace_is_an_error(text):
    with pytest.raises(InvalidInput, match="trace: (is empty|holds no requests)"):
        parse_trace(text)


def test_bytes_that_are_not_utf8_name_their_line():
    with pytest.raises(TraceError) as caught:
        parse_trace(f"{HEADER}\n2023-11-16 18:17:03.97,48,1\n".encode() + b"\xff\xfe,1,1\n")
    assert caught.value.line == 3


def test_json_lines_and_records_keep_spans_and_boundaries():
    lines = [
        {
            "arrival_ms": 20.5,
            "prompt_tokens": 9000,
            "output_tokens": 2,
            "atomic_spans": [[100, 900]],
            "message_boundaries": [50],
        },
        {"arrival_ms": 10.0, "prompt_tokens": 10, "output_tokens": 7},
    ]
    trace = parse_trace("\n".join(json.dumps(x) for x in lines))
    arrivals = list(trace.arrivals())
    assert [(a.id, a.arrival_ms, a.request.prompt_tokens, a.output_tokens) for a in arrivals] == [
        (1, 0.0, 10, 7),
        (0, 10.5, 9000, 2),
    ]
    assert arrivals[1].request.atomic_spans == ((100, 900),) and arrivals[1].request.message_boundaries == (50,)
    again = from_records(trace.records())
    assert [(a.arrival_ms, a.request) for a in again.arrivals()] == [(a.arrival_ms, a.request) for a in arrivals]
    with pytest.raises(InvalidInput) as caught:
        from_records([lines[1], {**lines[1], "output_tokens": True}])
    assert caught.value.field == "trace[1].output_tokens"


def test_select_windows_limits_and_scales_the_clock():
    trace = from_records([{"arrival_ms": t * 1000.0, "prompt_tokens": t + 1, "output_tokens": 1} for t in range(10)])
    part = trace.select((2.0, 7.0), limit=3, time_scale=2.5)
    assert list(part.prompt_tokens) == [3, 4, 5] and list(part.arrival_ms) == [0.0, 2500.0, 5000.0]
    assert list(part.ids) == [2, 3, 4]
    first = list(zip(range(12), looped(part)))
    assert [a.arrival_ms for _, a in first][3:5] == [7500.0, 10000.0] and first[-1][1].id == 11


def test_the_shared_trace_summary_equals_figures_computed_independently():
    rows = azure_rows()
    summary = summarise_trace(read_trace(str(AZURE)))
    prompts, outputs = [r[1] for r in rows], [r[2] for r in rows]
    times = sorted(r[0] for r in rows)
    span = (times[-1] - times[0]).total_seconds()
    minutes: dict[int, int] = {}
    for t in times:
        k = int((t - times[0]).total_seconds() // 60)
        minutes[k] = minutes.get(k, 0) + 1
    assert summary["requests"] == len(rows) == 8819
    assert summary["span_s"] == pytest.approx(span, abs=1e-6)
    assert summary["mean_rate_per_s"] == pytest.approx(len(rows) / span, rel=1e-6)
    assert summary["peak_minute_requests"] == max(minutes.values())
    assert summary["prompt_tokens"]["p50"] == 1469 == nearest_rank(prompts, 50)
    assert summary["output_tokens"]["p50"] == 13 == nearest_rank(outputs, 50)
    for q in (90, 99):
        assert summary["prompt_tokens"][f"p{q}"] == nearest_rank(prompts, q)
        assert summary["output_tokens"][f"p{q}"] == nearest_rank(outputs, q)
    assert (summary["prompt_tokens"]["max"], summary["output_tokens"]["max"]) == (max(prompts), max(outputs))
    assert summary["share_over_full_chunk"] == pytest.approx(sum(p > 4096 for p in prompts) / len(prompts), abs=1e-6)
    assert sum(summary["arrivals"]["counts"]) == len(rows) and summary["arrivals"]["bin_s"] == 60
    json.dumps(summary)  # plain data a web service can store


def test_a_trace_driven_simulate_serves_every_request_of_the_file_as_it_is():
    rows = azure_rows()
    a = ANALYSES["simulate"]
    params = a.validate({"trace": read_trace(str(AZURE)), "policies": ["cost", "rule"]})
    result = a.run(params, lambda event: None)
    ordered = sorted(rows, key=lambda r: (r[0], r[3]))
    t0 = ordered[0][0]
    expected = {i: ((t - t0).total_seconds() * 1000.0, p, o) for t, p, o, i in ordered}
    assert result["requests"] == len(rows) == 8819 and result["traffic"]["source"] == "trace"
    for policy in result["policies"]:
        got = {r["id"]: (r["arrival_ms"], r["prompt_tokens"], r["output_tokens"]) for r in policy["per_request"]}
        assert got.keys() == expected.keys()
        for rid, (arrival, prompt, output) in expected.items():
            assert got[rid][1:] == (prompt, output)
            assert got[rid][0] == pytest.approx(arrival, abs=1e-3)  # the test's datetime keeps 6 of 7 digits
    deltas = result["deltas"]
    assert deltas["requests"] == 8819 and len(deltas["cdf_ms"]) == 101 and len(deltas["worst"]) == 20
    by_id = {p["policy"]: {r["id"]: r for r in p["per_request"]} for p in result["policies"]}
    for w in deltas["worst"]:
        assert w["delta_ms"] == pytest.approx(by_id["rule"][w["id"]]["ttft_ms"] - by_id["cost"][w["id"]]["ttft_ms"])
        assert w["prompt_tokens"] == by_id["cost"][w["id"]]["prompt_tokens"]
    assert [w["delta_ms"] for w in deltas["worst"]] == sorted((w["delta_ms"] for w in deltas["worst"]), reverse=True)
    assert deltas["worst"][0]["delta_ms"] == deltas["max"]


def test_time_scale_spreads_the_arrivals():
    a = ANALYSES["simulate"]
    trace = read_trace(str(AZURE))
    one = a.run(a.validate({"trace": trace, "limit": 50, "policies": ["cost"]}), lambda e: None)
    two = a.run(a.validate({"trace": trace, "limit": 50, "policies": ["cost"], "time_scale": 2.0}), lambda e: None)
    assert two["offered_ms"] == pytest.approx(2 * one["offered_ms"])


def test_trace_options_without_a_trace_and_an_empty_window_are_refused():
    a = ANALYSES["simulate"]
    with pytest.raises(InvalidInput) as caught:
        a.validate({"limit": 5})
    assert caught.value.field == "limit"
    with pytest.raises(InvalidInput) as caught:
        a.validate({"trace": read_trace(str(AZURE)), "window": [90_000, 90_001]})
    assert caught.value.field == "window"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-S", "-E", "-m", "scheduler_core", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_trace_and_simulate_trace(tmp_path):
    out = cli("trace", str(AZURE), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["prompt_tokens"]["p50"] == 1469
    assert "8,819 requests" in cli("trace", str(AZURE)).stdout
    out = cli("simulate", "--trace", str(AZURE), "--window", "0:60", "--limit", "40", "--time-scale", "2", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["requests"] == 40 and result["traffic"]["window_s"] == [0.0, 60.0]
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{HEADER}\n2023-11-16 18:17:03.97,4808,10\n2023-11-16 18:17:04.00,4808,ten\n")
    for args in (("trace", str(bad)), ("simulate", "--trace", str(bad))):
        out = cli(*args)
        assert out.returncode == 2 and out.stdout == ""
        assert (
            out.stderr.strip()
            == "error: trace: line 3, column GeneratedTokens: must be a whole number of tokens, got 'ten'"
        )
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert cli("trace", str(empty)).returncode == 2
    out = cli("simulate", "--window", "5")
    assert out.returncode == 2 and "window" in out.stderr


def test_replaying_an_engine_s_own_request_records_under_its_policy_reproduces_its_launches():
    """Counterfactual replay's base case: what the engine served, rebuilt from its telemetry and run
    through `schedule` under the engine's own policy, makes the same prefill launches per request."""
    execution = AffineExecution()
    catalog = build_catalog({"catalog": "clean", "mixed_rows": [8, 32], "drift_factor": 1.6}, execution)
    shape = TrafficShape(30.0, 32, 9000, 2, 40, seed=4)
    served = list(itertools.islice(poisson_arrivals(shape, catalog.full_chunk), 300))
    never = Arrival(10**6, 1e15, Request(1), 1)  # the stream goes on, far beyond the window
    for policy in ("cost", "rule"):
        config = SchedulerConfig(policy, 32, 2)
        engine = EngineLoop(catalog, execution, config, iter([*served, never]))
        records = []
        for until in range(0, 200_000, 5_000):
            records += engine.advance(float(until))
        requests = [r for r in records if r["type"] == "request"]
        assert len(requests) == 300
        rebuilt = from_engine_requests(requests)
        replay = schedule(list(rebuilt.arrivals()), catalog, execution, config)
        # a rebuilt request's id is its row among the records
        graphs = {requests[o.id]["request"]: [c.graph for c in o.chunks] for o in replay.lanes}
        assert graphs == {r["request"]: r["launches"] for r in requests}
        ttft = {requests[o.id]["request"]: o.ttft_ms for o in replay.lanes}
        assert all(abs(ttft[r["request"]] - r["ttft_ms"]) < 1e-6 for r in requests)


def test_a_request_record_without_its_gaps_is_named():
    with pytest.raises(InvalidInput) as caught:
        from_engine_requests([{"t_ms": 5.0, "ttft_ms": 1.0, "itl_ms": [1.0], "prompt_tokens": 9}, {"t_ms": 5.0}])
    assert caught.value.field == "records[1].ttft_ms"
    with pytest.raises(InvalidInput) as caught:
        from_engine_requests([{"t_ms": 5.0, "ttft_ms": 1.0, "itl_ms": ["x"], "prompt_tokens": 9}])
    assert caught.value.field == "records[0].itl_ms"
