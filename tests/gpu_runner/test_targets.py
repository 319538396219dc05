"""Targets that can be decided, and a TTFT error split by source: replay faster than eager only
where the host bounds the cost, no slower elsewhere; the error rows add up to TTFT minus the
prediction, each judged against its stated bound."""

from __future__ import annotations

import pytest

from gpu_runner.targets import error_split
from scripts.gpu_check.targets import boot_to_boot, verdicts


def capture(p90: float = 1.01) -> dict:
    m = {"prefill": 64, "decode": 0, "median_ms": 1.0, "p10_ms": 1.0, "p90_ms": p90}
    return {"measurements": [m], "provenance": {"boot_s": 12.0}}


def test_faster_is_asked_of_host_bound_shapes_and_no_slower_of_the_rest():
    speedups = [
        {"prefill": 0, "decode": 8, "eager_over_replay": 1.8},
        {"prefill": 64, "decode": 8, "eager_over_replay": 1.5},
        {"prefill": 128, "decode": 0, "eager_over_replay": 1.01},  # host-bound, but within noise: missed
        {"prefill": 4096, "decode": 0, "eager_over_replay": 0.995},  # device-bound: as fast, met
    ]
    v = verdicts(capture(), speedups)
    assert v["replay_faster"]["worst"]["prefill"] == 128 and v["replay_faster"]["met"] is False
    assert v["replay_no_slower"]["worst"]["prefill"] == 4096 and v["replay_no_slower"]["met"] is True
    assert "decode, mixed, prefill <= 128" in v["replay_faster"]["target"]
    speedups[3]["eager_over_replay"] = 0.95  # slower than the noise allows
    assert verdicts(capture(), speedups)["replay_no_slower"]["met"] is False


def test_the_error_rows_add_up_to_ttft_minus_the_prediction_split_into_device_and_host():
    arm = {"ttft_ms": 105.0, "launch_sum_ms": 101.0, "alone_ms": 100.0, "table_ms": 98.0, "predicted_ms": 97.0}
    rows = {r["source"]: r for r in error_split(arm, copies_ms=1.5)}
    assert sum(r["ms"] for r in rows.values()) == pytest.approx(105.0 - 97.0)
    device = sum(r["ms"] for r in rows.values() if r["group"] == "device")
    assert device == pytest.approx(101.0 - 97.0)  # the launches' device time against the prediction
    assert rows["catalog drift"]["ms"] == pytest.approx(1.0) and rows["prefix attention"]["ms"] == pytest.approx(2.0)
    assert rows["graph interaction"]["pct"] == pytest.approx(1.0) and rows["graph interaction"]["met"]
    assert rows["host copies"]["ms"] == pytest.approx(1.5) and rows["host copies"]["bound"] is None
    rest = rows["host, the rest"]
    assert rest["ms"] == pytest.approx(2.5) and rest["pct"] == pytest.approx(100 * 2.5 / 105) and not rest["met"]
    assert rows["prefix attention"]["bound"] is None  # a real cost, not an error
    within = {r["source"]: r for r in error_split(arm, copies_ms=3.0)}
    assert within["host, the rest"]["met"]  # 1.0 ms of 105: under 2 %


def test_boot_to_boot_spread_of_a_prediction_is_judged():
    assert boot_to_boot([100.0, 101.0, 102.0])["met"] is True
    spread = boot_to_boot([100.0, 105.0])
    assert spread["pct"] == pytest.approx(5.0) and spread["met"] is False
