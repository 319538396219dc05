"""`scripts/gpu-check`: a step that fails leaves the steps needing it skipped, the report written,
a line per step, a non-zero exit; a short budget runs the first pass and skips the second, saying
why; memory is checked before each step. The CUDA steps themselves run only where a GPU is lent
(their CPU dry run: tests/gpu_runner/test_gpu_run.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_runner.targets import error_split
from scripts.gpu_check import budget, check, targets

ROOT = Path(__file__).resolve().parents[2]


def results(lines: list[str]) -> list[str]:
    """The lines that end a step (each started step has a `start` line before it)."""
    return [line for line in lines if not line.startswith("gpu-check:") and line.split()[1] != "start"]


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
    for name in ("numerics", "targets", "boots", "plans"):  # they plan with or read its catalogs
        assert (steps[name]["status"], steps[name]["line"]) == ("skipped", "skipped: needs capture")
    assert steps["ttft_clean"]["status"] == steps["ttft_drift_4096"]["status"] == "failed"  # independent: ran
    assert steps["cuda_tests"]["status"] == "ok"
    assert ran == ["capture", "ttft", "numerics", "ttft"]  # the skipped steps never started
    assert report["skipped"] == {n: "skipped: needs capture" for n in ("numerics", "targets", "boots", "plans")}
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in results(lines)] == list(steps)  # one result line per step
    assert lines[-1].startswith("gpu-check: 1 ok, 4 failed, 4 skipped")


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
    """What each analysis returns on a GPU, crafted: a boot of llama-2-7b (3 with `boots` > 1), two
    arms, passing numerics."""
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
        if params.get("boots", 1) == 1:
            return {**boots[0], "profile": {"name": "llama-2-7b-h200", "published": published}}
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
        sequence = {"sequence_ms": 41.0, "launches_ms": 40.6, "copies_ms": 0.3, "device_idle_ms": 0.1}
        return {
            "arms": [{**a, "errors": error_split(a, copies_ms=0.3)} for a in arms],
            "sequences": [sequence, sequence],
        }
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


def crafted_check(monkeypatch) -> None:
    """Every step's work crafted as a GPU would return it; the check's own code runs as it is."""
    monkeypatch.setattr(check, "_run", crafted)
    monkeypatch.setattr(
        check, "_more_boots", lambda profile, capture: crafted("capture", {"boots": 3, "preset": profile.preset})
    )
    monkeypatch.setattr(
        targets,
        "replay_vs_eager",
        lambda preset, shapes, **where: [
            {"prefill": 64, "decode": 0, "eager_over_replay": 1.4},
            {"prefill": 4096, "decode": 0, "eager_over_replay": 0.99},
        ],
    )
    monkeypatch.setattr(check, "_cuda_tests", lambda done: {"summary": "7 passed"})


def test_a_check_whose_steps_all_pass_exits_0_and_prints_the_table_of_its_figures(tmp_path, monkeypatch, capsys):
    crafted_check(monkeypatch)
    status = check.run_check(tmp_path / "report.json", {"device": "simulated"}, check.steps())

    assert status == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] and {s["status"] for s in report["steps"].values()} == {"ok"} and report["skipped"] == {}
    out = capsys.readouterr().out.splitlines()
    end = next(i for i, line in enumerate(out) if line.startswith("gpu-check:"))
    assert out[end].startswith("gpu-check: 9 ok, 0 failed, 0 skipped")
    assert out[end + 1].split() == ["step", "figure", "measured", "against", "verdict"]
    rows = report["table"]
    assert len(out) == end + 2 + len(rows)
    expected = [
        ["capture", "attention kernel run", "efficient", "pinned efficient", ""],
        ["capture", "boots", "1", "pids 100", ""],
        ["boots", "boots", "3", "pids 100, 101, 102", ""],
        ["boots", "boot-to-boot max/min, worst: 512+0", "1.017", "boot-to-boot max/min <= 1.03 per graph", "met"],
        ["capture", "prefill 2048: ours vs a100 published", "60.00 ms", "158.46 ms", "x0.38"],
        ["ttft_clean", "TTFT 3504 cost", "41.20 ms", "predicted 40.00 ms", "+3.0%"],
        ["ttft_drift_4096", "TTFT 3504 rule", "41.20 ms", "predicted 40.00 ms", "+3.0%"],
        [
            "ttft_clean",
            "  3504 cost: launch sequence as run",
            "41.00 ms",
            "launches 40.60 + copies 0.30 + idle 0.10",
            "",
        ],
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
        [
            "ttft_clean",
            "  3504 cost: host copies",
            "+0.30 ms (+0.7%)",
            "not bounded: chunk loads and the first token's copy, as a serve pays them",
            "",
        ],
        [
            "ttft_clean",
            "  3504 cost: host, the rest",
            "+0.30 ms (+0.7%)",
            "TTFT - device time - copies <= 2% of TTFT",
            "met",
        ],
        ["numerics", "bfloat16 worst |diff| / max |logit|", "0.012", "<= 0.05", "pass"],
        ["numerics", "bfloat16 KV cache, worst layer 31", "0.004", "<= 0.05 of the layer's max", "pass"],
        ["numerics", "bfloat16 causality probe", "bitwise identical", "bitwise required", "pass"],
        ["numerics_fp32", "float32 same chunking twice", "bitwise identical", "bitwise required", "pass"],
        ["targets", "p90/p10, worst: boot 0 64+0", "1.010", "p90/p10 <= 1.05 per graph", "met"],
        ["targets", "eager / replay, least: 64+0", "1.40x", "replay faster than eager", "met"],
        ["targets", "eager / replay, least: 4096+0", "0.99x", "replay no slower than eager", "met"],
        ["targets", "slowest boot", "20.0 s", "a boot <= 60 s", "met"],
    ]
    # among them the TTFT's +1.20 ms split by source, each row with its own bound and verdict
    assert [row for row in expected if row not in rows] == []
    plans = [r for r in rows if r[0] == "plans"]
    assert [r[1] for r in plans if "rule - cost" in r[1]] == [
        "3504: rule - cost, predicted (3 boots' catalogs)",
        "14000: rule - cost, predicted (3 boots' catalogs)",
    ]
    assert any(line.split()[:3] == ["ttft_clean", "TTFT", "3504"] and line.endswith("+3.0%") for line in out[end:])


def test_each_step_says_its_estimate_before_it_starts_from_what_the_first_capture_measured(
    tmp_path, monkeypatch, capsys
):
    crafted_check(monkeypatch)
    check.run_check(tmp_path / "report.json", {}, check.steps())
    lines = capsys.readouterr().out.splitlines()
    for name in ("capture", "boots", "cuda_tests"):
        start = next(i for i, line in enumerate(lines) if line.split()[:2] == [name, "start"])
        assert lines[start + 1].split()[:2] == [name, "ok"]  # its time after, on the next line
    steps = json.loads((tmp_path / "report.json").read_text())["steps"]
    assert steps["capture"]["estimate_s"] == budget.gpu_profile("llama-2-7b").boot_prior_s  # nothing measured yet
    assert steps["boots"]["estimate_s"] == 2 * 20.0  # two more boots, each as long as the first (20 s)
    assert "estimate 40 s, 0 of 300 s budget spent" in next(l for l in lines if l.startswith("boots ") and "start" in l)
    assert (steps["capture"]["pass"], steps["boots"]["pass"]) == ("first", "second")


def test_a_short_budget_runs_the_first_pass_whole_and_skips_the_second_saying_why(tmp_path, monkeypatch):
    crafted_check(monkeypatch)
    assert check.run_check(tmp_path / "report.json", {}, check.steps(), budget_s=1.0, deadline_s=60.0) == 1
    report = json.loads((tmp_path / "report.json").read_text())
    first = ("capture", "ttft_clean", "numerics", "numerics_fp32", "targets")
    assert all(report["steps"][n]["status"] == "ok" for n in first)  # never empties: one full pass
    assert set(report["skipped"]) == {"boots", "ttft_drift_4096", "cuda_tests"}
    assert report["skipped"]["boots"] == "skipped: estimate 40 s, 1 s of the 1 s budget left"
    assert report["skipped"]["cuda_tests"].startswith("skipped: estimate 60 s, ")
    assert report["steps"]["plans"]["status"] == "ok"  # no device time: an estimate of 0 s fits what is left
    assert report["budget"]["budget_s"] == 1.0 and report["budget"]["deadline_s"] == 60.0
    assert any(r[0] == "targets" for r in report["table"])  # the figures of the first pass are all there


def test_a_step_whose_boot_needs_more_memory_than_is_free_is_skipped_saying_both(tmp_path, monkeypatch):
    crafted_check(monkeypatch)
    free = 20 * 2**30  # the bf16 preset's boot needs more by estimate; tiny's fp32 numerics less
    assert check.run_check(tmp_path / "report.json", {}, check.steps(), free_bytes=lambda: free) == 1
    steps = json.loads((tmp_path / "report.json").read_text())["steps"]
    need = budget.memory_bytes(budget.gpu_profile("llama-2-7b"))
    assert steps["capture"]["line"] == f"skipped: needs about {need / 2**30:.1f} GiB by estimate, 20.0 GiB free"
    assert steps["capture"]["memory"] == {"need_bytes": need, "free_bytes": free}
    assert steps["numerics_fp32"]["status"] == "ok" and steps["numerics"]["line"] == "skipped: needs capture"


def test_every_cuda_marked_test_is_in_the_file_the_check_runs():
    mark = re.compile(r"^(pytestmark = \[?pytest\.mark\.cuda|\s*@pytest\.mark\.cuda\b)", re.M)
    marked = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py") if mark.search(p.read_text())}
    assert marked == {check.CUDA_TESTS}


def test_the_plans_step_sets_the_predicted_gap_against_the_boots_spread():
    """Three boots' catalogs whose 512 graph differs by 2 % boot to boot: the 3504-token arm's plans
    (cost: 512-token chunks; rule: one 4096) are predicted per boot, their spread judged."""
    boots = [
        {"catalog": [{"prefill": 512, "decode": 0, "ms": ms}, {"prefill": 4096, "decode": 0, "ms": 150.0}]}
        for ms in (10.0, 10.1, 10.2)
    ]
    result = check._plans({**boots[0], "boots": boots}, (3504, 14000))
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


def test_a_second_pass_step_starts_only_when_its_estimate_fits_the_budget_left(tmp_path):
    plan = [
        check.Step("first", lambda done: {}, lambda r: "ran", estimate=lambda done: 5.0),
        check.Step("second", lambda done: {}, lambda r: "ran", estimate=lambda done: 5.0, extra=True),
        check.Step("cheap", lambda done: {}, lambda r: "ran", estimate=lambda done: 0.0, extra=True),
    ]
    assert check.run_check(tmp_path / "report.json", {}, plan, budget_s=1.0) == 1
    steps = json.loads((tmp_path / "report.json").read_text())["steps"]
    assert steps["first"]["status"] == "ok"  # the first pass starts whatever its estimate
    assert (steps["second"]["status"], steps["second"]["line"]) == (
        "skipped",
        "skipped: estimate 5 s, 1 s of the 1 s budget left",
    )
    assert steps["cheap"]["status"] == "ok"


STUCK = """
import sys, threading
from pathlib import Path
from scripts.gpu_check import check
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
    assert [line.split()[0] for line in results(lines)[:3]] == ["first", "stuck", "after"]
    assert next(line for line in lines if line.startswith("gpu-check:")).startswith(
        "gpu-check: 1 ok, 1 failed, 1 skipped"
    )


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
