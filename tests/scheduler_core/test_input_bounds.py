"""Every catalog and number bounded where scheduler_core reads it: capacities, durations, graph
counts, numbers too large for a float; and a sweep's work estimate sized by the catalog it runs on."""

from __future__ import annotations

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.catalog import MAX_CAPACITY, MAX_GRAPHS, MAX_MS, Catalog
from scheduler_core.errors import InvalidInput

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
