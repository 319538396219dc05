"""A job failed by a stop names the stop's cause as the worker sees it when asked to stop: an
operator, its supervisor's death (`./dev up` healing the stack), a full var/ disk. Real processes
and a real full disk (a 1 MB tmpfs where one can be mounted); the full-stack drills are in
`test_heal_drills.py`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from heliosweb.common.processes import stop_cause


def test_a_stop_while_the_supervisor_lives_is_the_operators(tmp_path: Path):
    assert stop_cause(supervisor_pid=os.getppid(), var=tmp_path) == "stopped by operator"


def test_a_stop_after_the_supervisor_died_says_so(tmp_path: Path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    cause = stop_cause(supervisor_pid=gone.pid, var=tmp_path)
    assert cause == f"stopped: its supervisor (supervisord, pid {gone.pid}) died and the stack was restarted"


def test_a_stop_with_var_full_names_the_disk(tmp_path: Path):
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounts a tmpfs: needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (mount / "filler").write_bytes(b"\0" * (2**20 - 8192))
        cause = stop_cause(supervisor_pid=os.getppid(), var=mount)
        assert cause.startswith(f"stopped: the disk of {mount} was full (") and cause.endswith(
            "and the stack was restarted"
        )
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
