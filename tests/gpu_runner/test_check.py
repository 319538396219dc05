"""`scripts/gpu-check`: a step that fails leaves the steps needing it skipped, the report written,
a line per step, a non-zero exit. The CUDA steps themselves run only where a GPU is lent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_runner import check, targets

ROOT = Path(__file__).resolve().parents[2]


def test_a_failed_first_step_skips_the_steps_that_need_it_and_the_report_is_still_written(
    tmp_path, monkeypatch, capsys
):
    ran: list[str] = []

    def run(kind: str, params: dict) -> dict:
        ran.append(kind)
        raise RuntimeError(f"injected failure in {kind}")

    monkeypatch.setattr(check, "_run", run)
    monkeypatch.setattr(check, "_cuda_tests", lambda done: {"summary": "3 passed"})
    plan = check.steps()  # built after the patches: its steps call the patched functions
    status = check.run_check(tmp_path / "report.json", {"device": "simulated"}, plan)

    assert status == 1
    report = json.loads((tmp_path / "report.json").read_text())
    steps = report["steps"]
    assert list(steps) == [s.name for s in plan] and report["ok"] is False
    assert steps["capture"]["status"] == "failed"
    assert steps["capture"]["line"] == "RuntimeError: injected failure in capture"
    for name in ("plans", "numerics_bf16", "targets"):  # they plan with or read its catalogs
        assert steps[name] == {"status": "skipped", "line": "skipped: needs capture", "seconds": 0.0}
    assert steps["ttft_clean"]["status"] == steps["ttft_drift_4096"]["status"] == "failed"  # independent: ran
    assert steps["cuda_tests"]["status"] == "ok"
    assert ran == ["capture", "ttft", "numerics", "ttft"]  # the skipped steps never started
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == list(steps)  # one line per step
    assert "skipped: needs capture" in lines[1] and lines[-1].startswith("gpu-check: 1 ok, 4 failed, 3 skipped")


@pytest.mark.parametrize("verdict", ["differs beyond tolerance", "not bitwise identical"])
def test_the_same_chunking_twice_not_bitwise_identical_fails_the_numerics_step(monkeypatch, verdict):
    passes = {"verdict": "bitwise identical"}
    result = {
        "ok": False,
        "vs_one_shot": {"cost": passes, "rule": passes},
        "cost_vs_rule": passes,
        "same_chunking_twice": {"cost": {"verdict": verdict}, "rule": passes},
        "tolerance": {"dtype": "bfloat16", "max_rel_diff": 0.05},
    }
    monkeypatch.setattr(check, "_run", lambda kind, params: result)
    with pytest.raises(check.StepFailed, match=rf"'cost twice': '{verdict}'"):
        check._numerics({})


def test_a_numerics_verdict_beyond_tolerance_against_the_one_shot_fails_its_step(monkeypatch):
    passes = {"verdict": "bitwise identical"}
    result = {
        "ok": False,
        "vs_one_shot": {"cost": passes, "rule": {"verdict": "differs beyond tolerance"}},
        "cost_vs_rule": {"verdict": "within tolerance"},
        "same_chunking_twice": {"cost": passes, "rule": passes},
        "tolerance": {"dtype": "bfloat16", "max_rel_diff": 0.05},
    }
    monkeypatch.setattr(check, "_run", lambda kind, params: result)
    with pytest.raises(
        check.StepFailed, match=r"^numerics verdicts: \{'rule vs one-shot': 'differs beyond tolerance'\}"
    ):
        check._numerics({})


def crafted(kind: str, params: dict) -> dict:
    """What each analysis returns on a GPU, crafted: 3 boots of llama-2-7b, two arms, passing numerics."""
    if kind == "capture":
        boots = [
            {
                "provenance": {
                    "pid": 100 + i,
                    "boot_s": 20.0 + i,
                    "attention": {"pinned": "efficient", "observed": ["efficient"]},
                    "preset": params["preset"],
                },
                "catalog": [
                    {"prefill": 512, "decode": 0, "ms": 12.0 + i / 10},
                    {"prefill": 4096, "decode": 0, "ms": 90.0},
                ],
                "measurements": [
                    {"prefill": 64, "decode": 0, "median_ms": 1.0, "p10_ms": 0.99, "p90_ms": 1.0 + i / 100}
                ],
            }
            for i in range(3)
        ]
        published = [
            {
                "prefill": 2048,
                "ours_ms": 60.0,
                "a100": {"published_ms": [158.456] * 2, "ours_over_published": [0.38] * 2},
                "h100": None,
            }
        ]
        return {
            **boots[0],
            "boots": boots,
            "boot_spread_verdict": {
                "target": "boot-to-boot max/min <= 1.03 per graph",
                "worst": {"prefill": 512, "decode": 0, "max_over_min": 1.017},
                "met": True,
            },
            "profile": {"name": "llama-2-7b-h200", "published": published},
        }
    if kind == "ttft":
        arm = {
            "launch_count": 1,
            "graphs": [4096],
            "launch_sum_ms": 40.6,
            "alone_ms": 40.2,
            "table_ms": 40.0,
            "predicted_ms": 40.0,
        }
        arms = [{**arm, "prompt_tokens": 3504, "policy": p, "ttft_ms": 41.2} for p in ("cost", "rule")]
        return {"arms": [{**a, "errors": targets.error_split(a)} for a in arms]}
    comparison = {"verdict": "within tolerance", "max_rel_diff": 0.012}
    dtype, bound = ("float32", 1e-4) if params.get("preset") == "tiny" else ("bfloat16", 0.05)
    cache = {"verdict": "within tolerance", "max_rel_diff": 0.004, "worst_layer": 31}
    return {
        "ok": True,
        "vs_one_shot": {"cost": comparison, "rule": comparison},
        "kv_vs_one_shot": {"cost": cache, "rule": cache},
        "causality": {"cost": {"verdict": "bitwise identical"}, "rule": {"verdict": "bitwise identical"}},
        "cost_vs_rule": comparison,
        "same_chunking_twice": {"cost": {"verdict": "bitwise identical"}, "rule": {"verdict": "bitwise identical"}},
        "tolerance": {"dtype": dtype, "max_rel_diff": bound, "cache_rel_diff": bound, "top_k": 5},
    }


def test_a_check_whose_steps_all_pass_exits_0_and_prints_the_table_of_its_figures(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(check, "_run", crafted)
    monkeypatch.setattr(
        targets,
        "replay_vs_eager",
        lambda preset, shapes: [
            {"prefill": 64, "decode": 0, "eager_over_replay": 1.4},
            {"prefill": 4096, "decode": 0, "eager_over_replay": 0.99},
        ],
    )
    monkeypatch.setattr(check, "_cuda_tests", lambda done: {"summary": "7 passed"})
    status = check.run_check(tmp_path / "report.json", {"device": "simulated"}, check.steps())

    assert status == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] and {s["status"] for s in report["steps"].values()} == {"ok"}
    out = capsys.readouterr().out.splitlines()
    assert out[8].startswith("gpu-check: 8 ok, 0 failed, 0 skipped")
    assert out[9].split() == ["step", "figure", "measured", "against", "verdict"]
    rows = report["table"]
    assert len(out) == 10 + len(rows)
    expected = [
        ["capture", "attention kernel run", "efficient", "pinned efficient", ""],
        ["capture", "boots", "3", "pids 100, 101, 102", ""],
        ["capture", "boot-to-boot max/min, worst: 512+0", "1.017", "boot-to-boot max/min <= 1.03 per graph", "met"],
        ["capture", "prefill 2048: ours vs a100 published", "60.00 ms", "158.46 ms", "x0.38"],
        ["ttft_clean", "TTFT 3504 cost", "41.20 ms", "predicted 40.00 ms", "+3.0%"],
        ["ttft_drift_4096", "TTFT 3504 rule", "41.20 ms", "predicted 40.00 ms", "+3.0%"],
        [
            "ttft_clean",
            "  3504 cost: catalog drift",
            "+0.00 ms (+0.0%)",
            "not bounded: the drift experiment's own effect",
            "",
        ],
        [
            "ttft_clean",
            "  3504 cost: prefix attention",
            "+0.20 ms (+0.5%)",
            "not bounded: a real cost the catalog omits",
            "",
        ],
        [
            "ttft_clean",
            "  3504 cost: graph interaction",
            "+0.40 ms (+1.0%)",
            "|launches in sequence - alone| <= 3% of alone",
            "met",
        ],
        ["ttft_clean", "  3504 cost: host overhead", "+0.60 ms (+1.5%)", "TTFT - device time <= 2% of TTFT", "met"],
        ["numerics_bf16", "bfloat16 worst |diff| / max |logit|", "0.012", "<= 0.05", "pass"],
        ["numerics_bf16", "bfloat16 KV cache, worst layer 31", "0.004", "<= 0.05 of the layer's max", "pass"],
        ["numerics_bf16", "bfloat16 causality probe", "bitwise identical", "bitwise required", "pass"],
        ["numerics_fp32", "float32 same chunking twice", "bitwise identical", "bitwise required", "pass"],
        ["targets", "p90/p10, worst: boot 2 64+0", "1.030", "p90/p10 <= 1.05 per graph", "met"],
        ["targets", "eager / replay, least: 64+0", "1.40x", "replay faster than eager", "met"],
        ["targets", "eager / replay, least: 4096+0", "0.99x", "replay no slower than eager", "met"],
        ["targets", "slowest boot", "22.0 s", "a boot <= 60 s", "met"],
    ]
    # among them the TTFT's +1.20 ms split by source, each row with its own bound and verdict
    assert [row for row in expected if row not in rows] == []
    plans = [r for r in rows if r[0] == "plans"]
    assert [r[1] for r in plans if "rule - cost" in r[1]] == [
        "3504: rule - cost, predicted (3 boots' catalogs)",
        "14000: rule - cost, predicted (3 boots' catalogs)",
    ]
    assert any(line.split()[:3] == ["ttft_clean", "TTFT", "3504"] and line.endswith("+3.0%") for line in out[10:])


def test_the_plans_step_sets_the_predicted_gap_against_the_boots_spread():
    """Three boots' catalogs whose 512 graph differs by 2 % boot to boot: the 3504-token arm's plans
    (cost: 512-token chunks; rule: one 4096) are predicted per boot, their spread judged."""
    boots = [
        {"catalog": [{"prefill": 512, "decode": 0, "ms": ms}, {"prefill": 4096, "decode": 0, "ms": 150.0}]}
        for ms in (10.0, 10.1, 10.2)
    ]
    result = check._plans({**boots[0], "boots": boots})
    arm = result["arms"][0]
    assert arm["prompt_tokens"] == 3504
    assert arm["predicted_ms"]["cost"] == pytest.approx([70.0, 70.7, 71.4])  # 7 chunks of 512 per boot
    assert arm["predicted_ms"]["rule"] == pytest.approx([150.0] * 3)
    assert arm["boot_to_boot"]["cost"]["pct"] == pytest.approx(2.0) and arm["boot_to_boot"]["cost"]["met"]
    assert arm["gap_pct"][0] == pytest.approx(100 * 80 / 70)
    assert arm["gap_beyond_noise"]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GPU_CHECK_PRESET": "llama-9"}, "GPU_CHECK_PRESET: unknown preset 'llama-9'"),
        ({"GPU_CHECK_BUDGET_S": "ten"}, "not a number of seconds"),
        ({"GPU_CHECK_BUDGET_S": "300", "GPU_CHECK_DEADLINE_S": "200"}, "need 0 < budget < limit"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(env, message):
    with pytest.raises(ValueError, match=message):
        check.settings(env)


def test_the_default_preset_is_llama_2_7b_and_the_environment_chooses_another():
    assert check.settings({}) == ("llama-2-7b", check.BUDGET_S, check.DEADLINE_S)
    assert check.settings(
        {"GPU_CHECK_PRESET": "small", "GPU_CHECK_BUDGET_S": "100", "GPU_CHECK_DEADLINE_S": "300"}
    ) == (
        "small",
        100.0,
        300.0,
    )


def test_a_step_whose_figures_cannot_be_read_still_ends_in_a_finished_report(tmp_path, capsys):
    plan = [check.Step("odd", lambda done: {}, lambda r: "ran", rows=lambda r: [("x", r["missing"], "", "")])]
    assert check.run_check(tmp_path / "report.json", {}, plan) == 0
    assert json.loads((tmp_path / "report.json").read_text())["table"] == [
        ["odd", "no figures", "KeyError: 'missing'", "", ""]
    ]
    assert capsys.readouterr().out.splitlines()[-1].split() == ["odd", "no", "figures", "KeyError:", "'missing'"]


def test_steps_not_started_within_the_time_budget_are_skipped(tmp_path):
    plan = [check.Step("first", lambda done: {}, lambda r: "ran")]
    assert check.run_check(tmp_path / "report.json", {}, plan, budget_s=-1.0) == 1
    step = json.loads((tmp_path / "report.json").read_text())["steps"]["first"]
    assert (step["status"], step["line"]) == ("skipped", "skipped: time budget of -1 s spent")


STUCK = """
import sys, threading
from pathlib import Path
from gpu_runner import check, targets
plan = [
    check.Step("first", lambda done: {}, lambda r: "ran"),
    check.Step("stuck", lambda done: threading.Event().wait(), str),
    check.Step("after", lambda done: {}, str),
]
sys.exit(check.run_check(Path(sys.argv[1]), {"device": "simulated"}, plan, deadline_s=2.0))
"""


def test_a_step_still_running_at_the_hard_limit_is_stopped_and_the_report_finished(tmp_path):
    report = tmp_path / "report.json"
    out = subprocess.run(
        [sys.executable, "-c", STUCK, str(report)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1, out.stderr
    steps = json.loads(report.read_text())["steps"]
    assert [(s["status"], s["line"]) for s in steps.values()] == [
        ("ok", "ran"),
        ("failed", "stopped: still running at the check's 2 s limit"),
        ("skipped", "skipped: the check's 2 s limit was reached"),
    ]
    lines = out.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["first", "stuck", "after"]
    assert lines[3].startswith("gpu-check: 1 ok, 1 failed, 1 skipped")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_gpu_check_without_cuda_says_so_writes_its_report_and_exits_2(tmp_path):
    report = tmp_path / "gpu-check.json"
    out = subprocess.run(
        [str(ROOT / "scripts" / "gpu-check"), str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert out.returncode == 2 and "gpu-check: no CUDA device" in out.stderr
    written = json.loads(report.read_text())
    assert written["ok"] is False and "no CUDA device" in written["reason"]
    assert {s["line"] for s in written["steps"].values()} == {"skipped: needs a CUDA device"}
    assert len(out.stdout.splitlines()) == len(written["steps"]) + 1


def test_the_checks_steps_read_real_results_on_cpu(tmp_path, monkeypatch):
    """The steps' own code on real (CPU, tiny) results instead of crafted ones: every figure the
    table reads exists in what the analyses return. Only the device, the sizes and the arms differ."""
    real_run = check._run

    def on_cpu(kind: str, params: dict) -> dict:
        small = {"device": "cpu", "preset": "tiny", "capacities": [16, 32, 64], "repeats": 2}
        if "drift_capacities" in params:
            small["drift_capacities"] = [64]
        if kind == "capture":
            small.update(decode_rows=[2], boots=2)
        if kind == "ttft":
            small["runs"] = 1
        params = {k: v for k, v in params.items() if k != "boot_catalog"}
        return real_run(kind, {**params, **small})

    monkeypatch.setattr(check, "_run", on_cpu)
    monkeypatch.setattr(check, "ARMS", [100, 150])
    plan = [s for s in check.steps("tiny") if s.name not in ("targets", "cuda_tests")]  # CUDA-only
    assert check.run_check(tmp_path / "report.json", {"device": "cpu"}, plan) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert {s["status"] for s in report["steps"].values()} == {"ok"}
    figures = {(r[0], r[1].strip().split(":")[-1].strip()) for r in report["table"]}
    for source in ("catalog drift", "prefix attention", "graph interaction", "host overhead"):
        assert ("ttft_clean", source) in figures
    assert any(r[0] == "plans" and "rule - cost" in r[1] for r in report["table"])
    assert any(r[0] == "capture" and r[1].startswith("boot-to-boot max/min") for r in report["table"])
    assert any(r[0] == "numerics_bf16" and "KV cache" in r[1] for r in report["table"])  # fp32 here: tiny's dtype
    assert not any(r[1] == "no figures" for r in report["table"])
