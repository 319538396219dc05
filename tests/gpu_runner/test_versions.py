"""The versions the code runs on: too old or missing is refused in one line; every version that
shapes a run is recorded (`python -m gpu_runner.versions`, env.txt of `scripts/gpu-run`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_runner.versions import MIN_PYTHON, MIN_TORCH, refusal, report

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("python", "torch_version", "line"),
    [
        ((3, 10, 14), "2.11.0+cu130", "Python 3.10.14 is older than this code supports (3.11 or newer)"),
        ((3, 12, 3), "2.4.1+cu121", "torch 2.4.1+cu121 is older than this code supports (2.5 or newer)"),
        ((3, 12, 3), "2.5.0", None),
        ((3, 12, 3), "2.11.0+cu130", None),  # the device image
        ((3, 11, 7), "2.13.0+cpu", None),  # this repository's CI
    ],
)
def test_a_version_older_than_the_code_supports_is_refused_in_one_line(python, torch_version, line):
    assert refusal(python, torch_version) == line
    assert MIN_PYTHON == (3, 11) and MIN_TORCH == (2, 5)


def test_every_version_is_recorded_and_this_interpreter_is_not_refused():
    assert refusal() is None
    out = subprocess.run(
        [sys.executable, "-m", "gpu_runner.versions"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"python {sys.version.split()[0]}")
    assert f"torch {torch.__version__}" in lines
    assert f"torch.version.cuda {torch.version.cuda}" in lines and any(l.startswith("nvidia driver ") for l in lines)
    assert any(l.startswith("triton ") for l in lines) and any(l.startswith("numpy ") for l in lines)
    assert report()[2:] == lines[2:]  # the same lines in process
