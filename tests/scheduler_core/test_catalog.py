import math

import pytest

from scheduler_core.catalog import Catalog, catalog_from_mapping, drift, noise, unmeasured
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import AffineExecution, measured_catalog


def test_it_sorts_solo_prefill_capacities_and_ignores_decode_shapes():
    catalog = Catalog.from_dicts(
        [
            {"prefill": 256, "decode": 0, "ms": 1.0},
            {"prefill": 0, "decode": 8, "ms": 0.5},
            {"prefill": 64, "decode": 0, "ms": 0.2},
            {"prefill": 64, "decode": 4, "ms": 0.3},
        ]
    )
    assert catalog.capacities == (64, 256)
    assert catalog.full_chunk == 256


def test_it_treats_null_and_zero_as_unmeasured_and_predicts_them_free():
    catalog = Catalog.from_dicts([{"prefill": 64, "decode": 0, "ms": 0}, {"prefill": 128, "decode": 0, "ms": None}])
    assert catalog.prefill_ms == {64: None, 128: None}
    assert catalog.predicted_ms(64) == 0.0


@pytest.mark.parametrize(
    "items, field",
    [
        ([], "catalog"),
        ([{"prefill": 0, "decode": 4, "ms": 1.0}], "catalog"),
        ([{"prefill": 64, "decode": 0, "ms": 1.0}, {"prefill": 64, "decode": 0, "ms": 2.0}], "catalog[1]"),
        ([{"prefill": 64, "decode": 0, "ms": -1.0}], "catalog[0].ms"),
        ([{"prefill": 64, "decode": 0, "ms": math.nan}], "catalog[0].ms"),
        ([{"prefill": 64, "decode": 0, "ms": math.inf}], "catalog[0].ms"),
        ([{"prefill": 64, "decode": 0, "ms": "fast"}], "catalog[0].ms"),
        ([{"prefill": True, "decode": 0, "ms": 1.0}], "catalog[0].prefill"),
        ([{"prefill": -64, "decode": 0, "ms": 1.0}], "catalog[0].prefill"),
        ([{"prefill": 64, "ms": 1.0}], "catalog[0].decode"),
        ([{"prefill": 64, "decode": 0, "ms": 1.0, "extra": 1}], "catalog[0].extra"),
        ("not a list", "catalog"),
    ],
)
def test_it_rejects_invalid_catalogs_naming_the_field(items, field):
    with pytest.raises(InvalidInput) as excinfo:
        Catalog.from_dicts(items)
    assert excinfo.value.field == field


def test_drift_over_measures_one_graph_and_leaves_the_rest():
    clean = measured_catalog(AffineExecution())
    drifted = drift(clean, 4096, 1.6)
    assert drifted.prefill_ms[4096] == pytest.approx(66.0 * 1.6)
    assert all(drifted.prefill_ms[c] == clean.prefill_ms[c] for c in clean.capacities if c != 4096)


def test_noise_is_seeded_and_keeps_unmeasured_graphs_unmeasured():
    catalog = catalog_from_mapping({64: 1.0, 128: None, 256: 3.0})
    a, b, c = noise(catalog, seed=1, sigma=0.1), noise(catalog, seed=1, sigma=0.1), noise(catalog, seed=2, sigma=0.1)
    assert a == b and a != c
    assert a.prefill_ms[128] is None


def test_unmeasured_rejects_capacities_the_catalog_lacks():
    with pytest.raises(InvalidInput):
        unmeasured(catalog_from_mapping({64: 1.0}), [128])
