"""`scripts/gpu-run`, the one prepared command for a GPU host: on CPU its dry run goes through the
same sequence with the tiny preset and leaves at most 8 files in $OUT; without CUDA and without
--dry-run it stops at once, saying so, instead of hanging."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def tree_without_git(to: Path) -> Path:
    """What a GPU host receives: the working tree (the parts the command runs), no `.git`."""
    for part in ("gpu_runner", "scheduler_core", "scripts"):
        shutil.copytree(ROOT / part, to / part, ignore=shutil.ignore_patterns("__pycache__"))
    return to


def gpu_run(out: Path, *args: str, timeout: int = 400, root: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(root / "scripts" / "gpu-run"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OUT": str(out), "PYTHON": sys.executable, "HELIOS_CODE_REVISION": "f" * 40, **env},
    )


def test_the_command_is_under_2000_characters_as_docs_give_it():
    docs = (ROOT / "docs" / "gpu_runner.md").read_text()
    command = docs.split("<!-- gpu-run command -->")[1].split("```")[1].strip()
    assert command.endswith("scripts/gpu-run") and len(command) < 2000


def test_a_dry_run_goes_through_every_part_on_cpu_into_at_most_8_files(tmp_path):
    tree = tree_without_git(tmp_path / "tree")
    tmp_path = tmp_path / "out"
    out = gpu_run(tmp_path, "--dry-run", root=tree)
    assert out.returncode == 0, out.stdout + out.stderr
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [
        "attention.json",
        "dmon.txt",
        "env.txt",
        "gpu-check.json",
        "gpu-check.log",
        "gpu-run.log",
        "profile.txt",
    ]
    log = (tmp_path / "gpu-run.log").read_text()
    for part in ("attention", "capture", "profile"):
        assert f"gpu-run: {part} exit 0" in log
    env = (tmp_path / "env.txt").read_text()
    assert f"revision {'f' * 40}" in env and "== before" in env and "== after" in env
    capture = json.loads((tmp_path / "gpu-check.json").read_text())
    assert capture["provenance"]["code_revision"] == "f" * 40  # no .git on the host: the revision still recorded
    assert "boot_spread_verdict" in capture and capture["profile"]["name"] == "tiny-cpu"
    assert [r["queries"] for r in json.loads((tmp_path / "attention.json").read_text())["rows"]] == [64, 64, 128, 128]
    assert (tmp_path / "profile.txt").read_text().startswith("profile tiny-cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_says_so_and_stops_at_once(tmp_path):
    out = gpu_run(tmp_path, timeout=120)
    assert out.returncode == 2 and "no CUDA device here" in out.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env.txt", "gpu-run.log"]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [(["--fast"], {}, "unknown argument '--fast'"), ([], {"GPU_RUN_LIMIT_S": "8m"}, "GPU_RUN_LIMIT_S")],
)
def test_bad_arguments_exit_2_naming_them(tmp_path, args, env, message):
    out = gpu_run(tmp_path, *args, timeout=30, **env)
    assert out.returncode == 2 and message in out.stderr
