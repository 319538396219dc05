"""Latency buckets: each edge at most 10 % above the last, so a quantile read from them (here or by
Prometheus's `histogram_quantile`) is within 10 % of the truth; histograms stored on the old
61-bucket grid are moved to the new one with every count kept."""

from __future__ import annotations

import importlib
import math
import random

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from heliosweb.telemetry import buckets

rebinning = importlib.import_module("heliosweb.telemetry.migrations.0008_histograms_ten_percent_edges")


def test_each_edge_is_at_most_ten_percent_above_the_one_before():
    steps = [b / a for a, b in zip(buckets.EDGES_MS, buckets.EDGES_MS[1:])]
    assert max(steps) <= buckets.MAX_STEP + 1e-9
    assert (buckets.EDGES_MS[0], buckets.EDGES_MS[-1]) == (0.1, 94_000.0)


@pytest.mark.parametrize("sigma", [0.05, 0.3, 1.0])
def test_a_quantile_read_from_the_buckets_is_within_ten_percent_of_the_exact_one(sigma):
    rng = random.Random(int(sigma * 100))
    sample = sorted(rng.lognormvariate(math.log(150.0), sigma) for _ in range(5000))
    counts = buckets.empty()
    for value in sample:
        counts[buckets.bucket_of(value)] += 1
    for q in (0.5, 0.9, 0.95, 0.99):
        exact = sample[math.ceil(q * len(sample)) - 1]
        assert abs(buckets.quantile_ms(counts, q) - exact) <= 0.10 * exact, (q, exact)


def test_prometheus_gets_every_edge_cumulatively():
    counts = buckets.empty()
    for value in (0.05, 3.0, 3.1, 120_000.0):
        counts[buckets.bucket_of(value)] += 1
    exported = buckets.cumulative_seconds(counts)
    assert len(exported) == buckets.BUCKETS and exported[-1] == ("+Inf", 4)
    assert dict(exported)["0.003"] == 2 and dict(exported)["0.0033"] == 3 and dict(exported)["94.0"] == 3


def test_rebinning_keeps_every_count_and_the_cumulative_counts_at_the_shared_edges():
    rng = random.Random(5)
    old = [rng.randrange(50) for _ in range(len(rebinning.OLD_EDGES) + 1)]
    new = rebinning.rebin(old)
    assert len(new) == buckets.BUCKETS and sum(new) == sum(old)
    assert list(buckets.EDGES_MS) == rebinning.NEW_EDGES  # the frozen grid is the module's today
    for i, edge in enumerate(rebinning.OLD_EDGES):
        if edge in buckets.EDGES_MS:  # 1, 1.5, 2, 3, 5, 6 x 10^k
            j = buckets.EDGES_MS.index(edge)
            assert sum(old[: i + 1]) == sum(new[: j + 1]), edge
    assert rebinning.rebin(new) == new  # already moved: left as it is


def test_the_migration_moves_stored_histograms_to_the_new_grid(transactional_db):
    executor = MigrationExecutor(connection)
    before, after = (
        [("telemetry", "0007_state_user_tokens_hashed")],
        [("telemetry", "0008_histograms_ten_percent_edges")],
    )
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    Recipe = old_apps.get_model("recipes", "Recipe")
    Totals = old_apps.get_model("telemetry", "Totals")
    recipe = Recipe.objects.create(name="old-grid")
    ttft = [0] * 61
    ttft[10], ttft[60] = 7, 1  # old bucket 10 ends at 1 ms; bucket 60 is above 80 s
    Totals.objects.create(
        recipe=recipe, engine="e", version=1, policy="cost", requests=8, ttft_buckets=ttft, itl_buckets=[0] * 61
    )
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    moved = executor.loader.project_state(after).apps.get_model("telemetry", "Totals").objects.get()
    assert len(moved.ttft_buckets) == buckets.BUCKETS and moved.itl_buckets == buckets.empty()
    assert moved.ttft_buckets[buckets.bucket_of(1.0)] == 7 and moved.ttft_buckets[-1] == 1
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
