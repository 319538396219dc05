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

from gpu_runner import check

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
    assert steps["capture_small"]["status"] == "failed"
    assert steps["capture_small"]["line"] == "RuntimeError: injected failure in capture"
    for name in ("ttft_clean", "numerics_bf16", "targets"):  # they plan with or read its catalog
        assert steps[name] == {"status": "skipped", "line": "skipped: needs capture_small", "seconds": 0.0}
    assert steps["ttft_drift_4096"]["status"] == "failed"  # independent steps still ran
    assert steps["cuda_tests"]["status"] == "ok"
    assert ran == ["capture", "ttft", "numerics"]  # the skipped steps never started
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == list(steps)  # one line per step
    assert "skipped: needs capture_small" in lines[1] and lines[-1].startswith("gpu-check: 1 ok, 3 failed, 3 skipped")


def test_a_numerics_verdict_beyond_tolerance_fails_its_step(monkeypatch):
    differs = {"verdict": "differs beyond tolerance"}
    passes = {"verdict": "bitwise identical"}
    result = {
        "ok": False,
        "vs_one_shot": {"cost": passes, "rule": passes},
        "cost_vs_rule": passes,
        "same_chunking_twice": {"cost": differs, "rule": passes},
        "tolerance": {"dtype": "bfloat16", "max_rel_diff": 0.05},
    }
    monkeypatch.setattr(check, "_run", lambda kind, params: result)
    with pytest.raises(check.StepFailed, match=r"'cost twice': 'differs beyond tolerance'"):
        check._numerics({})


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
