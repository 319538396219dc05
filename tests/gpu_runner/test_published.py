"""A capture held against the published Llama-2-7B passes (Vidur's A100/H100 profiles, copied into
scheduler_core/profiles/llama-2-7b/ with their licence): the figures the data's README states, ranges where the
H100's attention is unpublished, ours over theirs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_runner import published

ROOT = Path(__file__).resolve().parents[2]


def test_the_a100_passes_are_the_readme_figures():
    assert published.prefill_ms("a100", 64) == pytest.approx((10.176, 10.176))  # "10.2 ms at 64 tokens"
    assert published.prefill_ms("a100", 2048) == pytest.approx((158.456, 158.456))  # "158.5 ms at 2,048"
    assert published.prefill_ms("a100", 100) is None  # no attention sample at 100 tokens


def test_an_h100_pass_is_its_linear_part_plus_none_to_all_of_the_a100_attention():
    low, high = published.prefill_ms("h100", 2048)
    assert low == pytest.approx(32 * 1.26325) and high == pytest.approx(32 * (1.26325 + 0.781))


def test_the_licence_notice_travels_with_the_data():
    readme = (published.DATA / "README.md").read_text()
    assert "MIT License" in readme and "Copyright (c) Microsoft Corporation." in readme


def capture(preset: str, mode: str = "cuda-graph") -> dict:
    return {
        "provenance": {
            "preset": preset,
            "mode": mode,
            "device": "NVIDIA H200",
            "torch": "2.11.0",
            "code_revision": "abc",
        },
        "catalog": [{"prefill": 2048, "decode": 0, "ms": 60.0}, {"prefill": 0, "decode": 8, "ms": 3.0}],
        "measurements": [
            {"prefill": 2048, "decode": 0, "median_ms": 60.0},
            {"prefill": 0, "decode": 8, "median_ms": 3.0},
        ],
    }


def test_a_llama_2_7b_capture_is_a_named_profile_with_ours_over_theirs():
    named = published.profile(capture("llama-2-7b"))
    assert named["name"] == "llama-2-7b-h200"
    [row] = named["published"]  # solo prefill graphs only
    assert row["prefill"] == 2048 and row["ours_ms"] == 60.0
    assert row["a100"]["ours_over_published"] == pytest.approx([60 / 158.456] * 2)
    low, high = published.prefill_ms("h100", 2048)
    assert row["h100"]["ours_over_published"] == pytest.approx([60 / high, 60 / low])
    lines = published.table(named["published"])
    assert lines[1].split() == [
        "2048",
        "60.00",
        "158.46",
        "0.38",
        f"{low:.2f}-{high:.2f}",
        f"{60 / high:.2f}-{60 / low:.2f}",
    ]


def test_another_preset_or_a_cpu_run_is_named_but_not_compared():
    assert published.profile(capture("small")) == {"name": "small-h200", "catalog": capture("small")["catalog"]}
    assert published.profile(capture("llama-2-7b", "eager-cpu"))["name"] == "llama-2-7b-cpu"


def published_cli(report: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "gpu_runner.published", str(report)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_the_command_prints_the_profile_of_a_gpu_check_report(tmp_path):
    report = tmp_path / "gpu-check.json"
    report.write_text(json.dumps({"steps": {"capture": {"status": "ok", "result": capture("llama-2-7b")}}}))
    out = published_cli(report)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("profile llama-2-7b-h200: NVIDIA H200") and "158.46" in out.stdout
    report.write_text(json.dumps({"steps": {"capture": {"status": "failed", "line": "BootOutOfMemory: ..."}}}))
    out = published_cli(report)
    assert out.returncode == 2 and "capture step did not pass: BootOutOfMemory" in out.stderr
