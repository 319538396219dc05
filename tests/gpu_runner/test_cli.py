"""`python -m gpu_runner`: JSON on stdout, errors on stderr with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpu_runner", *args], input=stdin, cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_capture_prints_a_boot_whose_catalog_feeds_ttft(tmp_path):
    out = cli("capture", "--device", "cpu", "--capacities", "16,32", "--graphs", "prefill", "--repeats", "2")
    assert out.returncode == 0, out.stderr
    boot = json.loads(out.stdout)
    assert [g["prefill"] for g in boot["catalog"]] == [16, 32]
    (tmp_path / "boot.json").write_text(out.stdout)
    ttft = cli(
        "ttft",
        "--device",
        "cpu",
        "--catalog",
        str(tmp_path / "boot.json"),
        "--prompt-tokens",
        "50",
        "--repeats",
        "2",
        "--runs",
        "1",
    )
    assert ttft.returncode == 0, ttft.stderr
    arms = json.loads(ttft.stdout)["arms"]
    assert [a["policy"] for a in arms] == ["cost", "rule"] and all(a["ttft_ms"] > 0 for a in arms)


def test_bad_input_exits_2_with_the_error_on_stderr_and_nothing_on_stdout():
    out = cli("capture", "--preset", "huge")
    assert out.returncode == 2 and out.stdout == ""
    assert "preset" in out.stderr and "huge" in out.stderr


def test_a_catalog_on_stdin_without_prefill_shapes_is_refused():
    out = cli("numerics", "--catalog", "/dev/stdin", stdin=json.dumps([{"prefill": 0, "decode": 4, "ms": 1.0}]))
    assert out.returncode == 2 and "no solo prefill graph" in out.stderr
