import random

import pytest

from scheduler_core.catalog import Catalog, catalog_from_mapping, drift, noise
from scheduler_core.execution import AffineExecution, measured_catalog
from scheduler_core.health import (
    PooledFit,
    affine_fit,
    boot_health,
    boots_health,
    repaired,
    shape_noise,
)

CLEAN = measured_catalog(AffineExecution(), decode_rows=(8,), mixed=((512, 8),))
SEEDS = 400
TRIALS = 500  # log-normal noise: seeded, so every run sees the same 500 recipes


def within(catalog: Catalog, *, seed: int, spread: float = 0.05) -> Catalog:
    """A boot whose every measurement lies within `spread` of the truth (5 % noise)."""
    rng = random.Random(seed)
    return catalog.replace_ms(lambda g: g.ms * rng.uniform(1 - spread, 1 + spread))


def recipe(seed: int, boots: int) -> list[Catalog]:
    return [within(CLEAN, seed=seed * 100 + b) for b in range(boots)]


@pytest.mark.parametrize("boots", [3, 5])
def test_an_over_measure_of_one_shape_by_1_3x_is_flagged_every_time(boots):
    rng = random.Random(boots)
    misses, false_alarms = [], 0
    for seed in range(SEEDS):
        catalogs = recipe(seed, boots)
        victim = rng.randrange(boots)
        capacity = rng.choice(CLEAN.capacities)
        catalogs[victim] = drift(catalogs[victim], capacity, 1.3)
        health = boot_health(catalogs[victim], catalogs)
        if (capacity, 0) not in health.shapes():
            misses.append((seed, capacity))
        false_alarms += sum(boot_health(c, catalogs).status == "flagged" for i, c in enumerate(catalogs) if i != victim)
    assert misses == []
    assert false_alarms / (SEEDS * (boots - 1)) < 0.01


@pytest.mark.parametrize("boots", [1, 2, 3, 8])
def test_clean_boots_are_flagged_in_under_one_percent_of_cases(boots):
    flagged = 0
    for seed in range(SEEDS):
        catalogs = recipe(seed, boots)
        flagged += sum(boot_health(c, catalogs).status == "flagged" for c in catalogs)
    assert flagged / (SEEDS * boots) < 0.01


def log_normal_recipe(seed: int, boots: int) -> list[Catalog]:
    """Unbounded 5 % noise: every measurement scaled by exp(N(0, 0.05))."""
    return [noise(CLEAN, seed=seed * 100 + b, sigma=0.05) for b in range(boots)]


@pytest.mark.parametrize("boots", [3, 5])
def test_under_log_normal_noise_clean_boots_are_flagged_in_under_one_percent_of_cases(boots):
    flagged = sum(h.status == "flagged" for seed in range(TRIALS) for h in boots_health(log_normal_recipe(seed, boots)))
    assert flagged / (TRIALS * boots) < 0.01


@pytest.mark.parametrize("boots", [3, 5])
def test_under_log_normal_noise_over_measures_are_caught_as_often_as_the_noise_allows(boots):
    """No detector catches every 1.3x over-measure under unbounded noise at 1 % false alarms (one
    that knew the true costs would still miss about 1 %: bench/health_bench.py); this one misses
    a few per cent at 1.3x and none from 1.5x (the pull request's drift was 1.6x)."""
    rng = random.Random(boots)
    missed = {1.3: 0, 1.5: 0}
    for seed in range(TRIALS):
        catalogs = log_normal_recipe(seed, boots)
        victim, capacity = rng.randrange(boots), rng.choice(CLEAN.capacities)
        for factor in missed:
            injected = [drift(c, capacity, factor) if i == victim else c for i, c in enumerate(catalogs)]
            missed[factor] += (capacity, 0) not in boots_health(injected)[victim].shapes()
    assert missed[1.3] / TRIALS < 0.06
    assert missed[1.5] == 0


def test_boots_health_judges_like_boot_health():
    catalogs = log_normal_recipe(7, 4)
    catalogs[1] = drift(catalogs[1], 1024, 1.4)
    assert boots_health(catalogs) == [boot_health(c, catalogs) for c in catalogs]
    assert [h.status for h in boots_health(catalogs)] == ["ok", "flagged", "ok", "ok"]


def test_the_pooled_fit_leaves_a_drifted_graph_out_and_can_leave_out_one_measurement():
    catalogs = [CLEAN, CLEAN, drift(CLEAN, 4096, 1.6)]
    pooled = PooledFit.of(catalogs)
    assert pooled.fit is not None
    assert pooled.fit.fixed_ms == pytest.approx(2.0) and pooled.fit.ms_per_token == pytest.approx(1 / 64)
    assert (2, 4096) not in pooled.kept and len(pooled.kept) == 20
    without = pooled.without(0, 64)
    assert without is not None and without.predict(64) == pytest.approx(3.0)


def test_a_shape_every_boot_measures_off_the_fit_is_judged_across_boots_only():
    """A graph that truly costs more than the affine model says (a different kernel, say) is not
    an outlier when every boot agrees on it."""
    odd = CLEAN.replace_ms(lambda g: g.ms * 1.5 if g.shape == (256, 0) else g.ms)
    catalogs = [noise(odd, seed=s, sigma=0.02) for s in range(4)]
    assert [h.status for h in boots_health(catalogs)] == ["ok"] * 4
    catalogs[3] = drift(catalogs[3], 256, 1.3)
    assert (256, 0) in boots_health(catalogs)[3].shapes()


def test_the_pull_requests_drift_is_flagged_with_its_ratio_and_reason():
    catalogs = [noise(CLEAN, seed=s, sigma=0.01) for s in range(4)]
    catalogs[2] = drift(catalogs[2], 4096, 1.6)
    health = boot_health(catalogs[2], catalogs)
    assert health.status == "flagged"
    [flag] = health.flagged
    assert (flag.prefill, flag.decode) == (4096, 0)
    assert flag.ratio == pytest.approx(1.6, rel=0.05)
    assert flag.reason == f"outlier: {flag.ratio:.2f}x what the recipe's 3 other boots predict (slower)"


def test_an_under_measure_is_an_outlier_too():
    catalogs = [CLEAN, CLEAN, drift(CLEAN, 1024, 0.7)]
    [flag] = boot_health(catalogs[2], catalogs).flagged
    assert flag.prefill == 1024 and "faster" in flag.reason


def test_decode_and_mixed_shapes_are_compared_across_boots():
    slow_decode = CLEAN.replace_ms(lambda g: g.ms * 2 if g.kind == "decode" else g.ms)
    [flag] = boot_health(slow_decode, [CLEAN, CLEAN, slow_decode]).flagged
    assert (flag.prefill, flag.decode) == (0, 8)


def test_a_lone_boot_is_judged_against_its_own_affine_fit():
    lone = drift(CLEAN, 2048, 1.6)
    health = boot_health(lone, [lone])
    assert [(f.prefill, f.reason.split(":")[0]) for f in health.flagged] == [(2048, "off-fit")]
    assert health.compared_with == 1


def test_the_affine_fit_recovers_the_true_model_despite_one_drifted_graph():
    fit = affine_fit(drift(CLEAN, 4096, 1.6))
    assert fit is not None
    assert fit.fixed_ms == pytest.approx(2.0) and fit.ms_per_token == pytest.approx(1 / 64)
    assert affine_fit(catalog_from_mapping({64: 1.0})) is None


def test_a_larger_graph_measured_faster_than_a_smaller_one_is_non_monotonic():
    catalog = catalog_from_mapping({64: 1.0, 128: 5.0, 256: 1.2, 512: 1.4})
    [flag] = boot_health(catalog, [catalog, catalog, catalog]).flagged  # three boots agree: no outlier
    assert (flag.prefill, flag.reason) == (128, "non-monotonic: measured slower than the larger graph 256")
    assert flag.ratio == pytest.approx(5.0 / 1.2)


def test_noise_is_each_shapes_p90_over_p10_across_boots():
    catalogs = [CLEAN.replace_ms(lambda g, f=f: g.ms * f) for f in (1.0, 1.0, 1.0, 1.0, 2.0)]
    row = next(n for n in shape_noise(catalogs) if n.prefill == 64 and n.decode == 0)
    assert row.boots == 5 and row.p10_ms == pytest.approx(3.0) and row.p90_ms == pytest.approx(4.8)
    assert row.to_dict()["noisy"] is True
    assert shape_noise([CLEAN]) == []


def test_repaired_replaces_flagged_shapes_by_the_median_of_the_other_boots():
    catalogs = [within(CLEAN, seed=s) for s in range(4)]
    catalogs[1] = drift(catalogs[1], 4096, 1.6)
    repair = repaired(catalogs[1], catalogs)
    others = sorted(c.prefill_ms[4096] for i, c in enumerate(catalogs) if i != 1)
    assert repair.catalog.prefill_ms[4096] == pytest.approx(others[1])
    assert repair.catalog.prefill_ms[2048] == catalogs[1].prefill_ms[2048]  # untouched
    [record] = repair.replaced
    assert record["source"] == "median of 3 other boots"
    assert record["from_index"] == [0, 2, 3]  # the other boots, by their positions in the list given
    assert record["was_ms"] == catalogs[1].prefill_ms[4096] and (record["prefill"], record["decode"]) == (4096, 0)
    assert repair.record()["repaired"] is True
    assert boot_health(repair.catalog, [c for i, c in enumerate(catalogs) if i != 1] + [repair.catalog]).flagged == ()


def test_repaired_falls_back_to_the_fit_without_other_boots():
    lone = drift(CLEAN, 2048, 1.6)
    repair = repaired(lone, [lone])
    assert repair.catalog.prefill_ms[2048] == pytest.approx(CLEAN.prefill_ms[2048])
    assert repair.replaced[0]["source"] == "affine fit of this boot"
    assert repair.replaced[0]["from_index"] == []


def test_a_healthy_boot_repairs_to_itself():
    repair = repaired(CLEAN, [CLEAN, CLEAN, CLEAN])
    assert repair.catalog == CLEAN and repair.replaced == ()


def test_a_recipes_boots_are_judged_each_in_order():
    catalogs = [CLEAN, CLEAN, drift(CLEAN, 512, 1.5)]
    boots = [h.to_dict() for h in boots_health(catalogs)]
    assert [b["status"] for b in boots] == ["ok", "ok", "flagged"]
    assert boots[2]["flagged"][0]["prefill"] == 512
