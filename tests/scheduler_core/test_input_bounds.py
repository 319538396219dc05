"""Every catalog and number bounded where scheduler_core reads it: capacities, durations, graph
counts, numbers too large for a float; and a sweep's work estimate sized by the catalog it runs on."""

from __future__ import annotations

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.catalog import MAX_CAPACITY, MAX_GRAPHS, MAX_MS, Catalog
from scheduler_core.errors import InvalidInput
from scheduler_core.limits import MAX_DURATION_MS, MAX_TOKENS
from scheduler_core.plan_io import answer
from scheduler_core.planner import MAX_PLAN_WORK, plan_work
from scheduler_core.request import Request
from scheduler_core.validation import int_of_text, require_text, text_problem

GOOD = {"prefill": 64, "decode": 0, "ms": 1.0}


@pytest.mark.parametrize(
    "catalog, field",
    [
        ([{"prefill": 2**63, "decode": 0, "ms": 1}], "catalog[0].prefill"),
        ([{"prefill": 10**30, "decode": 0, "ms": 1}], "catalog[0].prefill"),
        ([GOOD, {"prefill": 0, "decode": MAX_CAPACITY + 1, "ms": 1}], "catalog[1].decode"),
        ([{"prefill": 64, "decode": 0, "ms": 1e308}], "catalog[0].ms"),
        ([{"prefill": 64, "decode": 0, "ms": MAX_MS * 1.01}], "catalog[0].ms"),
        ([{"prefill": 64, "decode": 0, "ms": int("9" * 401)}], "catalog[0].ms"),
        ([{"prefill": p, "decode": 0, "ms": 1} for p in range(1, MAX_GRAPHS + 2)], "catalog"),
    ],
)
def test_a_catalog_out_of_bounds_is_refused_naming_the_entry(catalog, field):
    with pytest.raises(InvalidInput) as exc:
        Catalog.from_dicts(catalog)
    assert exc.value.field == field


def test_the_bounds_themselves_are_accepted():
    graphs = [{"prefill": p, "decode": 0, "ms": MAX_MS} for p in range(MAX_CAPACITY - MAX_GRAPHS + 1, MAX_CAPACITY + 1)]
    assert len(Catalog.from_dicts(graphs).capacities) == MAX_GRAPHS


def test_a_number_too_large_for_a_float_is_refused_not_crashed_on():
    with pytest.raises(InvalidInput) as exc:
        ANALYSES["pr22"].validate({"fixed_ms": int("9" * 401)})
    assert exc.value.field == "fixed_ms" and "401 digits" in exc.value.message


def test_a_sweep_over_a_boot_of_tiny_graphs_is_sized_by_that_boot():
    """A boot whose largest graph is 1 token makes one launch per token: 20,000 lengths up to 2^20
    tokens would hold the only slot for days, and must be refused like any oversized run."""
    tiny = [{"prefill": 1, "decode": 0, "ms": 0.01}]
    params = {"boot_catalog": tiny, "count": 20000, "prompt_max": 1048576}
    with pytest.raises(InvalidInput) as exc:
        ANALYSES["sweep"].validate(params)
    assert "too large" in exc.value.message
    # The same sweep over the pull request's catalogs (4096-token chunks) stays within the cap.
    ANALYSES["sweep"].validate({"count": 20000, "prompt_max": 1048576})


PR22 = [{"prefill": c, "decode": 0, "ms": 2 + c / 64} for c in (64, 128, 256, 512, 1024, 2048, 4096)]
ONE_TOKEN = [{"prefill": 1, "decode": 0, "ms": 0.01}]


@pytest.mark.parametrize(
    "catalog, request_, policies",
    [
        (PR22, {"prompt_tokens": 1 << 62}, ["cost"]),  # issue 18 row 1: planned until memory ran out
        (PR22, {"prompt_tokens": MAX_TOKENS + 1}, ["cost"]),
        (ONE_TOKEN, {"prompt_tokens": MAX_TOKENS}, ["cost"]),  # row 1: 11.5 s and 500 MB before
        (ONE_TOKEN, {"prompt_tokens": 12_000}, ["cost", "rule"]),  # the bound counts every policy: ...
        ([ONE_TOKEN[0], {"prefill": MAX_TOKENS, "decode": 0, "ms": 5}], {"prompt_tokens": MAX_TOKENS}, ["cost"]),
        (PR22, {"prompt_tokens": MAX_TOKENS, "atomic_spans": [[MAX_TOKENS - 10, MAX_TOKENS]]}, ["cost"]),
    ],
)
def test_a_plan_too_large_is_refused_before_any_planning(catalog, request_, policies):
    with pytest.raises(InvalidInput) as exc:
        answer({"policies": policies, "catalog": catalog, "request": request_})
    assert exc.value.field == "request.prompt_tokens"


def test_a_plan_within_the_bound_for_one_policy_is_planned():
    assert (
        answer({"policy": "cost", "catalog": ONE_TOKEN, "request": {"prompt_tokens": 12_000}})["launch_count"] == 12_000
    )


def test_the_largest_prompt_on_the_pull_requests_catalogs_is_planned():
    plans = answer({"policies": ["cost", "rule"], "catalog": PR22, "request": {"prompt_tokens": MAX_TOKENS}})["plans"]
    assert [p["launch_count"] for p in plans] == [256, 256]
    parsed = Catalog.from_dicts(PR22)
    assert 2 * plan_work(parsed, Request.parse({"prompt_tokens": MAX_TOKENS}, parsed)) <= MAX_PLAN_WORK


def test_plan_work_is_at_least_the_launches_any_policy_makes():
    """The estimate must not undercount: every accepted plan makes no more launches than it says."""
    cases = [(ONE_TOKEN, 5000), (PR22, 100_000), ([{"prefill": 63, "decode": 0, "ms": 1}, GOOD], 50_000)]
    for catalog, tokens in cases:
        parsed = Catalog.from_dicts(catalog)
        work = plan_work(parsed, Request.parse({"prompt_tokens": tokens}, parsed))
        for p in answer({"policies": ["cost", "rule"], "catalog": catalog, "request": {"prompt_tokens": tokens}})[
            "plans"
        ]:
            assert p["launch_count"] * len(parsed.capacities) <= work


@pytest.mark.parametrize(
    "execution, field",
    [
        ({"fixed_ms": MAX_DURATION_MS * 2, "ms_per_token": 0, "first_token_ms": 0}, "execution.fixed_ms"),
        ({"table": [{"prefill": 64, "decode": 0, "ms": MAX_DURATION_MS * 2}]}, "execution.table[0].ms"),
        ({"table": [{"prefill": MAX_TOKENS + 1, "decode": 0, "ms": 1}]}, "execution.table[0].prefill"),
        ({"table": [{"prefill": p, "decode": 0, "ms": 1} for p in range(1, MAX_GRAPHS + 2)]}, "execution.table"),
    ],
)
def test_an_execution_model_out_of_bounds_is_refused(execution, field):
    with pytest.raises(InvalidInput) as exc:
        answer({"policy": "cost", "catalog": PR22, "request": {"prompt_tokens": 10}, "execution": execution})
    assert exc.value.field == field


@pytest.mark.parametrize("text", ["1_0", "\uff11", "١", "nan", "inf", "1e3", " ", "0x10", "--1"])
def test_numbers_as_text_are_ascii_decimal_digits_only(text):
    assert int_of_text(text) is None


def test_text_no_database_stores_is_named():
    assert text_problem("plain é 😀") is None
    assert "NUL" in (text_problem("a\x00b") or "")
    assert "surrogate" in (text_problem("a\udfff") or "")
    with pytest.raises(InvalidInput) as exc:
        require_text("a\x00", "rationale", max_length=10)
    assert exc.value.field == "rationale"
