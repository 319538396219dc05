"""Counterfactual replay: the simulated engine's own request records, replayed under the policy it ran,
repeat its launches, TTFTs and padding exactly; the result is deterministic and says so; the
other policy's run is the same traffic; bad input is named."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.analyses.replay import from_engine_records
from scheduler_core.analyses.simulate import build_catalog
from scheduler_core.engine import EngineLoop
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import AffineExecution
from scheduler_core.policies import PR22_POLICIES, selectable_policies
from scheduler_core.request import Request
from scheduler_core.scheduler import Arrival, SchedulerConfig
from scheduler_core.traffic import TrafficShape, poisson_arrivals

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ANALYSES["replay"]


def engine_requests(policy: str, n: int = 200, seed: int = 4) -> list[dict]:
    """What the simulated engine posts for `n` Poisson requests under `policy` on the clean catalog
    at the default affine costs (replay's default setting)."""
    execution = AffineExecution()
    catalog = build_catalog({"catalog": "clean", "mixed_rows": [8, 32], "drift_factor": 1.6}, execution)
    shape = TrafficShape(30.0, 32, 9000, 2, 40, seed=seed)
    served = list(itertools.islice(poisson_arrivals(shape, catalog.full_chunk), n))
    never = Arrival(10**6, 1e15, Request(1), 1)
    engine = EngineLoop(catalog, execution, SchedulerConfig(policy, 32, 2), iter([*served, never]))
    engine.set_policy(policy, 1)
    records = []
    for until in range(0, 200_000, 5_000):
        records += engine.advance(float(until))
    requests = [r for r in records if r["type"] == "request"]
    assert len(requests) == n
    return requests


def replay(requests: list[dict], **params) -> dict:
    trace, served = from_engine_records(requests, ["engine-a"] * len(requests))
    return REPLAY.run(REPLAY.validate({"trace": trace, "served": list(served), **params}), lambda event: None)


@pytest.mark.parametrize("policy", PR22_POLICIES)
def test_replaying_the_engine_s_records_under_its_own_policy_repeats_what_it_served(policy):
    requests = engine_requests(policy)
    result = replay(requests)
    assert [row["policy"] for row in result["table"]] == list(selectable_policies())
    (reproduced,) = result["reproduction"]
    assert reproduced == {
        "policy": policy,
        "requests": len(requests),
        "same_launches": len(requests),
        "same_launches_share": 1.0,
        "ttft_max_gap_ms": pytest.approx(0.0, abs=1e-6),
    }
    (served,) = result["served"]["policies"]
    own = next(row for row in result["table"] if row["policy"] == policy)
    for key in ("requests", "prefill_launches", "padded_prefill_tokens"):
        assert own[key] == served[key], key
    for key in ("ttft_p50_ms", "ttft_p99_ms"):
        assert own[key] == pytest.approx(served[key], abs=1e-5), key
    # the served figures, computed here from the records themselves
    assert served["prefill_launches"] == sum(len(r["launches"]) for r in requests)
    assert served["padded_prefill_tokens"] == sum(sum(r["launches"]) - r["prompt_tokens"] for r in requests)
    assert result["served"]["engines"] == ["engine-a"]


def test_the_other_policy_runs_the_same_requests_and_the_deltas_pair_them():
    requests = engine_requests("cost")
    result = replay(requests)
    rule = next(p for p in result["policies"] if p["policy"] == "rule")
    assert sorted(r["prompt_tokens"] for r in rule["per_request"]) == sorted(r["prompt_tokens"] for r in requests)
    deltas = result["deltas"]
    assert deltas["requests"] == len(requests)
    cost = {r["id"]: r["ttft_ms"] for r in next(p for p in result["policies"] if p["policy"] == "cost")["per_request"]}
    worst = deltas["worst"][0]
    assert (deltas["before"], deltas["after"]) == ("cost", "rule")  # its first two policies
    assert worst["delta_ms"] == pytest.approx(worst["after_ttft_ms"] - cost[worst["id"]], abs=1e-5)


def test_a_replay_is_deterministic_and_says_so():
    requests = engine_requests("rule", n=80)
    first, second = replay(requests), replay(requests)
    assert first == second
    assert first["deterministic"] is True and first["randomness"].startswith("none")


def test_a_replay_needs_traffic_and_one_served_row_per_request():
    with pytest.raises(InvalidInput) as caught:
        REPLAY.validate({})
    assert caught.value.field == "trace"
    requests = engine_requests("cost", n=20)
    trace, served = from_engine_records(requests)
    with pytest.raises(InvalidInput) as caught:
        REPLAY.validate({"trace": trace, "served": [s.to_dict() for s in served[:-1]]})
    assert caught.value.field == "served"
    rows = [s.to_dict() for s in served]
    rows[3]["ttft_ms"] = -1
    with pytest.raises(InvalidInput) as caught:
        REPLAY.validate({"trace": trace, "served": rows})
    assert caught.value.field == "served[3].ttft_ms"
    with pytest.raises(InvalidInput) as caught:
        REPLAY.validate({"trace": trace, "policies": ["cost", "fastest"]})
    assert caught.value.field == "policies[]"


def test_the_cli_replays_a_trace_file_with_what_was_served(tmp_path):
    requests = engine_requests("cost", n=60)
    trace, served = from_engine_records(requests)
    trace_file, served_file = tmp_path / "trace.jsonl", tmp_path / "served.jsonl"
    trace_file.write_text("".join(json.dumps(r) + "\n" for r in trace.records()))
    # the trace file's rows are in arrival order: the served rows follow the same order
    order = list(trace.ids)
    served_file.write_text("".join(json.dumps(served[i].to_dict()) + "\n" for i in order))
    out = subprocess.run(
        [sys.executable, "-m", "scheduler_core", "replay", "--trace", str(trace_file), "--served", str(served_file)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "replayed cost repeats the engine's launches for 60/60 requests" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "scheduler_core", "replay", "--json"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 2 and out.stderr.strip().startswith("error: trace: is required")


def test_a_stored_replay_keeps_each_served_row_with_its_request():
    """A job stores its params as JSON and reads them back: the requests arrive out of record order
    (records come by finish time), and the served rows must still pair with the same requests."""
    requests = engine_requests("rule", n=120)
    trace, served = from_engine_records(requests)
    assert list(trace.ids) != sorted(trace.ids)  # finish order is not arrival order here
    params = REPLAY.validate({"trace": trace, "served": [s.to_dict() for s in served]})
    stored = REPLAY.from_json(json.loads(json.dumps(REPLAY.to_json(params))))
    again, first = REPLAY.run(stored, lambda event: None), REPLAY.run(params, lambda event: None)
    assert again.pop("traffic")["name"] == "records"  # a stored trace is read back from its records
    first.pop("traffic")
    assert again == first
    (reproduced,) = again["reproduction"]
    assert reproduced["same_launches"] == 120
