"""`--pair before,after` on the analyses that compare policies: the text's deltas compare that pair,
a third policy declared in a test included; a policy that is unknown or did not run is refused
before the run, in one line naming it, with status 2."""

from __future__ import annotations

import json

import pytest

from scheduler_core.__main__ import main
from scheduler_core.policies import POLICIES

from .test_cli import cli
from .test_evidence_bound import FirstGraphPolicy

THIRD = FirstGraphPolicy.name
RAN = f"cost,{THIRD},rule"


@pytest.fixture(autouse=True)
def third(monkeypatch):
    monkeypatch.setitem(POLICIES, THIRD, FirstGraphPolicy)


def run(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_a_sweeps_text_compares_the_pair_picked(capsys):
    args = ("sweep", "--count", "12", "--prompt-max", "9000", "--policies", RAN)
    result = json.loads(run(capsys, *args, "--json"))
    text = run(capsys, *args, "--pair", f"rule,{THIRD}")
    assert f"delta = {THIRD} − rule TTFT" in text and "cost" not in text.split("TTFT", 1)[1]
    for catalog, by_policy in result["series"].items():  # after - before per prompt length, made here
        delta = [a - b for a, b in zip(by_policy[THIRD]["ttft_ms"], by_policy["rule"]["ttft_ms"])]
        wins, loses = sum(d < -1e-6 for d in delta), sum(d > 1e-6 for d in delta)
        assert f"{catalog:<6} {THIRD} wins {wins}, loses {loses}," in text
        assert f"mean {sum(delta) / len(delta):+.2f} ms" in text
    assert f"delta = {THIRD} − cost TTFT" in run(capsys, *args)  # by default the first two


def test_a_simulates_text_names_both_deltas_of_the_pair_picked(capsys):
    args = ("simulate", "--requests", "20", "--policies", RAN)
    result = json.loads(run(capsys, *args, "--json"))
    text = run(capsys, *args, "--pair", f"{THIRD},rule")
    by_policy = {p["policy"]: p for p in result["policies"]}
    after = {r["id"]: r["ttft_ms"] for r in by_policy["rule"]["per_request"]}
    before = {r["id"]: r["ttft_ms"] for r in by_policy[THIRD]["per_request"]}
    biggest = max(after[i] - before[i] for i in after)
    p50 = by_policy["rule"]["ttft_ms"]["p50"] - by_policy[THIRD]["ttft_ms"]["p50"]
    assert f"rule − {THIRD}, percentile of per-request differences: p50" in text and f"max {biggest:+.2f} ms" in text
    assert f"rule − {THIRD}, difference of percentiles: p50 {p50:+.2f}" in text


@pytest.mark.parametrize(
    ("pair", "named"),
    [("cost,nope", "'nope' is not a policy that ran"), ("cost,fcfs", "'fcfs'"), ("cost", "before,after")],
)
def test_a_pair_it_cannot_compare_is_refused_in_one_line(pair, named):
    out = cli("capacity", "--policies", "cost,rule", "--pair", pair)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: pair: ") and named in out.stderr
