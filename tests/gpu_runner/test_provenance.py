"""What a boot records of where it ran: the code revision without `.git` (HELIOS_CODE_REVISION), and
the GPU's clocks, power and throttle reasons as nvidia-smi reports them (a stand-in script here)."""

from __future__ import annotations

import subprocess
import types

import pytest
import torch

from gpu_runner import device

FAKE_SMI = """#!/bin/sh
case "$*" in
  *{refused}*) echo 'Field "{refused}" is not a valid field to query.' >&2; exit 2 ;;
esac
echo '1980, 2619, 1980, 412.5, 700.00, 51, P0, 0x0000000000000004'
"""


def fake_smi(tmp_path, monkeypatch, refused: str = "no-such-field") -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text(FAKE_SMI.replace("{refused}", refused))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{device.os.environ['PATH']}")


def test_without_git_the_revision_comes_from_helios_code_revision(monkeypatch):
    not_a_repo = types.SimpleNamespace(returncode=128, stdout="")
    monkeypatch.setattr(device.subprocess, "run", lambda *a, **k: not_a_repo)
    monkeypatch.setenv("HELIOS_CODE_REVISION", "c723c97" + "0" * 33)
    assert device.code_revision() == "c723c97" + "0" * 33
    monkeypatch.delenv("HELIOS_CODE_REVISION")
    assert device.code_revision() == "unknown"


def test_in_a_git_checkout_the_revision_is_head(monkeypatch):
    monkeypatch.setenv("HELIOS_CODE_REVISION", "not this")
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert device.code_revision() == head


def test_clocks_power_and_throttle_reasons_are_read_from_nvidia_smi(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch)
    state = device.gpu_state(torch.device("cuda", 0))
    assert state == {
        "sm_mhz": 1980.0,
        "mem_mhz": 2619.0,
        "max_sm_mhz": 1980.0,
        "power_w": 412.5,
        "power_limit_w": 700.0,
        "temperature_c": 51.0,
        "pstate": "P0",
        "throttle": ["sw_power_cap"],
        "source": "nvidia-smi",
    }


def test_an_older_driver_is_asked_for_throttle_reasons_by_their_old_name(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, refused="clocks_event_reasons.active")
    assert device.gpu_state(torch.device("cuda", 0))["throttle"] == ["sw_power_cap"]


def test_on_cpu_or_without_nvidia_smi_there_is_no_state(tmp_path, monkeypatch):
    assert device.gpu_state(torch.device("cpu")) is None
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi, and NVML cannot reach a driver here
    assert device._from_smi(0) is None


@pytest.mark.parametrize(
    ("mask", "names"), [(0, ["none"]), (0x1, ["gpu_idle"]), (0x44, ["sw_power_cap", "hw_thermal_slowdown"])]
)
def test_throttle_masks_are_named(mask, names):
    assert device.throttle_reasons(mask) == names


def test_the_capture_report_shows_the_gpu_state_before_and_after(tmp_path, monkeypatch):
    from gpu_runner.report import capture_text

    fake_smi(tmp_path, monkeypatch)
    state = device.gpu_state(torch.device("cuda", 0))
    provenance = {
        "device": "NVIDIA H200",
        "mode": "cuda-graph",
        "preset": "small",
        "dtype": "bfloat16",
        "torch": "2.11",
    }
    text = capture_text(
        {"provenance": {**provenance, "gpu_state": {"before": state, "after": None}}, "measurements": []}
    )
    assert text.splitlines()[1] == (
        "gpu before: SM 1980.0 MHz (max 1980.0), 412.5 of 700.0 W, 51.0 C, P0, throttle sw_power_cap; after: not read"
    )
