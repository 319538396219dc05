"""`scripts/gpu-run`, the one prepared command for a GPU host: on CPU its dry run goes through the
same sequence with the tiny preset (gpu-check's every step, its budget arithmetic, every section of
its report) and leaves at most 8 files in $OUT; its exit status is the check's verdict. Without CUDA
and without --dry-run it stops at once, saying so; a Python without torch (or one too old) is
refused in one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scripts.gpu_check.budget import DRY
from scripts.gpu_check.check import steps

ROOT = Path(__file__).resolve().parents[2]


def tree_without_git(to: Path) -> Path:
    """What a GPU host receives: the working tree (the parts the command runs), no `.git`."""
    for part in ("gpu_runner", "scheduler_core", "scripts", "tests/gpu_runner"):
        shutil.copytree(ROOT / part, to / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pytest.ini", "tests/__init__.py"):
        shutil.copy(ROOT / part, to / part)
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


def test_a_dry_run_goes_through_every_step_of_the_check_on_cpu_into_at_most_8_files(tmp_path):
    tree = tree_without_git(tmp_path / "tree")
    tmp_path = tmp_path / "out"
    out = gpu_run(tmp_path, "--dry-run", root=tree)
    assert out.returncode == 0, out.stdout + out.stderr  # the check's verdict: every step passed
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
    for part in ("attention", "gpu-check", "profile"):
        assert f"gpu-run: {part} exit 0" in log
    budget, limit = map(int, re.search(r"gpu-check: budget (\d+)s, hard limit (\d+)s", log).groups())
    assert limit - budget == 165 and 0 < budget < limit <= 465  # the real run's arithmetic, on its limit
    env = (tmp_path / "env.txt").read_text()
    assert f"revision {'f' * 40}" in env and "== before" in env and "== after" in env
    assert f"torch {torch.__version__}" in env and "python 3." in env and "versions exit 0" in env

    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert report["dry_run"] is True and report["profile"]["device"] == "cpu" and report["ok"] is True
    assert list(report["steps"]) == [s.name for s in steps(DRY)]
    assert {s["status"] for s in report["steps"].values()} == {"ok"} and report["skipped"] == {}
    assert all(s["estimate_s"] is not None for s in report["steps"].values())  # said before each started
    assert report["budget"]["budget_s"] == budget and report["budget"]["deadline_s"] == limit
    capture = report["steps"]["capture"]["result"]
    assert capture["provenance"]["code_revision"] == "f" * 40  # no .git on the host: the revision still recorded
    assert capture["provenance"]["attention"]["verdict"] == "ran as pinned"
    assert "boot_spread_verdict" in report["steps"]["boots"]["result"]
    figures = {(r[0], r[1].strip().split(":")[-1].strip()) for r in report["table"]}
    for source in ("launch sequence as run", "catalog drift", "prefix attention", "graph interaction"):
        assert ("ttft_clean", source) in figures
    assert ("ttft_clean", "host copies") in figures and ("ttft_clean", "host, the rest") in figures
    sections = {r[0] for r in report["table"]}
    assert sections == {s.name for s in steps(DRY)} - {"cuda_tests"}  # every step's figures (the tests: a line)
    assert "skipped" in report["steps"]["cuda_tests"]["line"]  # no CUDA here: said, never run as passed
    assert [r["queries"] for r in json.loads((tmp_path / "attention.json").read_text())["rows"]] == [64, 64]
    assert (tmp_path / "profile.txt").read_text().startswith("profile tiny-cpu")
    lines = (tmp_path / "gpu-check.log").read_text().splitlines()
    assert sum(" start " in line for line in lines) == len(report["steps"])  # each said its estimate first


def test_a_python_without_torch_is_refused_in_one_line(tmp_path):
    bare = tmp_path / "python"  # the same interpreter without its site-packages: no torch there
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    out = gpu_run(tmp_path / "out", "--dry-run", timeout=60, PYTHON=str(bare))
    assert out.returncode == 2
    assert out.stdout.strip().splitlines()[-1] == "gpu-run: refused: torch is not installed for this Python"


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
