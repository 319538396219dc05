"""A capture of the tiny preset on CPU: a complete, well-formed catalog with its provenance,
each boot measured in a fresh process."""

from __future__ import annotations

import os

import pytest

from gpu_runner.analyses import ANALYSES
from scheduler_core.analyses.params import parse_catalog
from scheduler_core.catalog import Catalog

CAPTURE = ANALYSES["capture"]
SMALL = {"capacities": [16, 32, 64], "decode_rows": [2], "repeats": 3, "device": "cpu"}


@pytest.fixture(scope="module")
def captured() -> tuple[dict, list[dict]]:
    events: list[dict] = []
    return CAPTURE.run(CAPTURE.validate(SMALL), events.append), events


@pytest.fixture(scope="module")
def two_drifted_boots() -> dict:
    params = CAPTURE.validate({**SMALL, "graphs": "prefill", "drift_capacities": [64, 16], "drift_load": 2, "boots": 2})
    return CAPTURE.run(params, lambda e: None)


def test_capture_yields_a_catalog_with_every_shape_measured(captured):
    result, _ = captured
    catalog = Catalog.from_dicts(result["catalog"])
    assert [g.shape for g in catalog.graphs] == [(16, 0), (32, 0), (64, 0), (0, 2), (16, 2)]
    assert all(g.ms is not None and g.ms > 0 for g in catalog.graphs)
    assert catalog.capacities == (16, 32, 64)


def test_the_catalog_is_a_measured_boot_any_scheduler_core_analysis_accepts(captured):
    assert parse_catalog(captured[0]["catalog"], "boot_catalog").to_dicts() == captured[0]["catalog"]


def test_each_measurement_carries_its_spread_samples_and_capture_time(captured):
    result, _ = captured
    for row, graph in zip(result["measurements"], result["catalog"]):
        assert row["p10_ms"] <= row["median_ms"] <= row["p90_ms"]
        assert row["median_ms"] == graph["ms"]
        assert row["samples"] == 3 and row["capture_ms"] > 0 and row["mode"] == "eager-cpu"
        assert row["warmup"] >= 3 and isinstance(row["settled"], bool)  # at least the default 3, then settling


def test_the_boot_records_its_provenance(captured):
    provenance = captured[0]["provenance"]
    assert provenance["mode"] == "eager-cpu" and provenance["preset"] == "tiny" and provenance["dtype"] == "float32"
    assert provenance["cuda"] is None and provenance["device"].startswith("cpu")
    assert {"torch", "code_revision", "time", "seed", "python", "process_started", "startup_s"} <= set(provenance)
    assert provenance["drift"] is None  # an undisturbed boot
    assert provenance["attention"] == {  # tiny's CPU kernel, as it ran, its grouped heads not repeated
        "pinned": "flash",
        "observed": ["flash"],
        "verdict": "ran as pinned",
        "kv_heads": "grouped (enable_gqa)",
    }
    assert provenance["pid"] != os.getpid()  # booted in a process of its own


def result_order(result: dict) -> list[str]:
    return result["provenance"]["order"]


def test_each_shape_streams_a_measurement_event_as_it_lands(captured):
    _, events = captured
    measured = [e for e in events if e["type"] == "measurement"]
    assert [e["shape"] for e in measured] == result_order(captured[0])  # in the seeded order they were timed
    assert sorted((e["prefill"], e["decode"]) for e in measured) == sorted([(16, 0), (32, 0), (64, 0), (0, 2), (16, 2)])
    assert {"median_ms", "p10_ms", "p90_ms", "samples", "capture_ms", "mode"} <= set(measured[0])
    steps = [e for e in events if e["type"] == "progress"]
    assert steps[-1]["done"] == steps[-1]["total"]


def test_a_capture_of_a_given_catalog_boots_exactly_its_shapes():
    given = [{"prefill": 32, "decode": 0, "ms": None}, {"prefill": 16, "decode": 0, "ms": 5.0}]
    result = CAPTURE.run(CAPTURE.validate({"boot_catalog": given, "repeats": 2, "device": "cpu"}), lambda e: None)
    assert [(g["prefill"], g["decode"]) for g in result["catalog"]] == [(32, 0), (16, 0)]


def test_another_seeds_model_moves_the_fingerprint_far_beyond_rounding(two_drifted_boots):
    params = CAPTURE.validate({**SMALL, "capacities": [16], "graphs": "prefill", "repeats": 1, "seed": 1})
    other = CAPTURE.run(params, lambda e: None)["output_fingerprint"]
    assert abs(other - two_drifted_boots["boots"][0]["output_fingerprint"]) > 1


def test_each_boot_is_a_fresh_process_with_its_own_provenance(two_drifted_boots):
    provenance = [b["provenance"] for b in two_drifted_boots["boots"]]
    pids = {p["pid"] for p in provenance}
    assert len(pids) == 2 and os.getpid() not in pids
    assert provenance[0]["process_started"] != provenance[1]["process_started"]
    assert all(p["startup_s"] > 0 for p in provenance)


def test_two_boots_catalogs_differ_only_by_noise(two_drifted_boots):
    """Same shapes, same model computing the same logits, same settings: only the timings differ."""
    first, second = two_drifted_boots["boots"]
    assert [(g["prefill"], g["decode"]) for g in first["catalog"]] == [
        (g["prefill"], g["decode"]) for g in second["catalog"]
    ]
    # Equal up to float32 rounding, not to the bit: a CI run's two boots differed by 0.0013 on logits
    # whose absolute values sum to about 1,624; another seed's model moves the sum by 58.
    assert first["output_fingerprint"] == pytest.approx(second["output_fingerprint"], rel=0, abs=0.02)
    per_process = {"pid", "process_started", "startup_s", "boot_s", "time", "drift", "order", "host_load"}
    assert first["provenance"]["order"] != second["provenance"]["order"]  # each boot its own seeded order
    assert {k: v for k, v in first["provenance"].items() if k not in per_process} == {
        k: v for k, v in second["provenance"].items() if k not in per_process
    }
    assert [r["medians_ms"] for r in two_drifted_boots["boot_spread"]] == [
        [first["catalog"][i]["ms"], second["catalog"][i]["ms"]] for i in range(3)
    ]


def test_drift_times_the_chosen_shapes_under_competing_work_and_records_the_slowdown_it_achieved(two_drifted_boots):
    result = two_drifted_boots
    drifted = [m for m in result["measurements"] if m["drifted"]]
    assert [(m["prefill"], m["decode"]) for m in drifted] == [(16, 0), (64, 0)]
    assert all(m["clean_median_ms"] > 0 for m in drifted)
    assert all(m["drift_slowdown"] == m["median_ms"] / m["clean_median_ms"] for m in drifted)
    assert all(
        "clean_median_ms" not in m and "drift_slowdown" not in m for m in result["measurements"] if not m["drifted"]
    )
    drift = result["provenance"]["drift"]  # stored with the boot
    assert (drift["capacities"], drift["load"]) == ([16, 64], 2)
    assert drift["achieved"] == [{"prefill": m["prefill"], "slowdown": m["drift_slowdown"]} for m in drifted]
    text = CAPTURE.format_text(result)
    assert "drifted: prefill 16, 64 (load 2)" in text.splitlines()[0]
    assert f"x{drifted[1]['drift_slowdown']:.2f} its undisturbed median" in text
    assert [r["prefill"] for r in result["boot_spread"]] == [16, 32, 64]
    assert all(r["max_over_min"] >= 1.0 and r["met"] == (r["max_over_min"] <= 1.03) for r in result["boot_spread"])
    verdict = result["boot_spread_verdict"]  # judged and shown
    assert verdict["worst"]["max_over_min"] == max(r["max_over_min"] for r in result["boot_spread"])
    assert f"boot-to-boot spread: worst prefill {verdict['worst']['prefill']}" in text


def test_the_text_report_lists_every_shape_with_its_spread(captured):
    result, _ = captured
    lines = CAPTURE.format_text(result).splitlines()
    assert "eager-cpu" in lines[0]
    assert len(lines) == 2 + len(result["measurements"])  # one boot: no spread, no published comparison (tiny)
    assert any(line.startswith("prefill 16 ") for line in lines)
