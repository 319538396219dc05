import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core.analyses.fuzz import ANALYSIS, Case, broken_invariant, failure, random_case, shrink, simpler
from scheduler_core.catalog import catalog_from_mapping
from scheduler_core.errors import InvalidInput, Stalled
from scheduler_core.planner import plan
from scheduler_core.policies import Launch
from scheduler_core.request import Request


def fuzz(**params):
    events = []
    return ANALYSIS.run(ANALYSIS.validate(params), events.append), events


def replay(counterexample):
    case = Case(tuple(counterexample["input"]["catalog"]), counterexample["input"]["request"])
    catalog, request = case.parse()
    return case, catalog, request


def test_it_finds_the_rule_v1_stall_and_shrinks_it_to_a_replayable_plan_input():
    result, _ = fuzz(cases=300, seed=0, policies=["rule-v1"])
    entry = result["policies"]["rule-v1"]
    assert entry["stalls"] > 0
    found = entry["counterexample"]
    _, catalog, request = replay(found)
    with pytest.raises(Stalled) as exc:
        plan("rule-v1", catalog, request)
    assert exc.value.position == found["failure"]["position"]
    assert plan("rule", catalog, request).end == request.plan_end  # the fix finishes the same input
    assert len(catalog.capacities) <= 2 and len(request.atomic_spans) == 1
    assert request.message_boundaries == () and request.prefill_limit is None
    text = ANALYSIS.format_text(result).splitlines()
    assert (
        text[2]
        == f"  minimal counterexample (case {entry['first_failing_case']}): stalled at position {exc.value.position}"
    )
    assert json.loads(text[3]) == found["input"]  # the printed line is a `plan` input as is


def test_the_counterexample_is_minimal_no_simpler_case_still_stalls():
    found = fuzz(cases=300, seed=3, policies=["rule-v1"])[0]["policies"]["rule-v1"]["counterexample"]
    case, _, _ = replay(found)
    for candidate in simpler(case):
        if candidate.parse() is not None:
            assert (failure("rule-v1", candidate) or {}).get("kind") != "stalled"


def test_rule_and_cost_survive_many_random_cases():
    result, _ = fuzz(cases=3000, seed=11, policies=["rule", "cost"])
    for name in ("rule", "cost"):
        entry = result["policies"][name]
        assert entry["plans"] == 3000
        assert (entry["stalls"], entry["violations"], entry["counterexample"]) == (0, 0, None)


def test_shrinking_the_spec_stall_keeps_a_stall_and_never_grows():
    request = {
        "prompt_tokens": 9000,
        "message_boundaries": [6000],
        "atomic_spans": [[2000, 5000]],
        "prefill_limit": None,
    }
    catalog = tuple(
        {"prefill": c, "decode": 0, "ms": 1.0 if c < 4096 else None} for c in (64, 128, 256, 512, 1024, 2048, 4096)
    )
    small, steps = shrink(Case(catalog, request), lambda c: (failure("rule-v1", c) or {}).get("kind") == "stalled")
    assert steps > 0 and failure("rule-v1", small)["kind"] == "stalled"
    assert small.request["prompt_tokens"] < 9000 and len(small.catalog) <= 2


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32))
def test_random_cases_are_valid_spec_inputs(seed):
    case = random_case(random.Random(seed), 2048)
    assert case.parse() is not None


def test_it_catches_a_plan_that_skips_tokens_or_splits_a_span():
    catalog = catalog_from_mapping({4: 1.0, 8: 1.0})
    request = Request(12, atomic_spans=((6, 9),))
    sound = plan("cost", catalog, request).launches
    assert broken_invariant(catalog, request, sound) is None
    gap = (Launch(4, 0, 4, "catalog", 1.0), Launch(8, 5, 12, "catalog", 1.0))
    assert "starts at 5" in broken_invariant(catalog, request, gap)
    split = (Launch(8, 0, 8, "catalog", 1.0), Launch(4, 8, 12, "catalog", 1.0))
    assert "inside an atomic span" in broken_invariant(catalog, request, split)
    short = (Launch(4, 0, 4, "catalog", 1.0),)
    assert "plan ends at 4" in broken_invariant(catalog, request, short)
    idle = (Launch(4, 0, 0, "catalog", 1.0),)
    assert "does no work" in broken_invariant(catalog, request, idle)


def test_the_same_seed_replays_the_same_report():
    assert fuzz(cases=100, seed=5)[0] == fuzz(cases=100, seed=5)[0]


def test_the_report_is_plain_json_and_progress_reaches_the_last_case():
    result, events = fuzz(cases=200, seed=1)
    assert json.loads(json.dumps(result)) == result
    done = [e["done"] for e in events if e["type"] == "progress"]
    assert done[0] == 0 and done[-1] == 200


def test_it_rejects_a_run_that_would_take_hours():
    with pytest.raises(InvalidInput, match="too large"):
        ANALYSIS.validate({"cases": 1_000_000, "prompt_max": 1 << 17})
