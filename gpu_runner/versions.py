"""The versions this code runs on: the oldest it supports, refused in one line when older, and
every version a GPU run records (`scripts/gpu-run` writes them into env.txt).

The device image (docs/gpu_runner.md) is Python 3.12 with torch 2.11.0+cu130 and nothing
installable; CI and the CPU tests run Python 3.11 with torch 2.13 (CPU). Nothing here needs more
than the standard library until torch is asked for its build (CUDA, cuDNN, NCCL, the device).

`python -m gpu_runner.versions`: the versions, one a line; exit 2 with the refusal when too old.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
import sys

MIN_PYTHON = (3, 11)  # datetime.UTC, typing.Self
# SDPA's `enable_gqa` and `torch.OutOfMemoryError` (2.5); `torch.nn.attention.sdpa_kernel` with a
# list of backends and cuDNN attention (2.3)
MIN_TORCH = (2, 5)
# Recorded when installed: what the runs import, or what a GPU's timing depends on.
PACKAGES = ("torch", "triton", "numpy", "pytest", "nvidia-cudnn-cu13", "nvidia-cublas", "nvidia-nccl-cu13")


def _release(version: str) -> tuple[int, ...]:
    """`2.11.0+cu130` -> (2, 11, 0): the numeric release, local build and pre-release tags dropped."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def refusal(python: tuple[int, ...] | None = None, torch: str | None = None) -> str | None:
    """One line saying what is too old (or missing) to run this code, else None."""
    python = python or sys.version_info[:3]
    if python[:2] < MIN_PYTHON:
        return (
            f"Python {'.'.join(map(str, python))} is older than this code supports "
            f"({'.'.join(map(str, MIN_PYTHON))} or newer)"
        )
    torch = torch or installed("torch")
    if torch is None:
        return "torch is not installed for this Python"
    if _release(torch)[:2] < MIN_TORCH:
        return f"torch {torch} is older than this code supports ({'.'.join(map(str, MIN_TORCH))} or newer)"
    return None


def report() -> list[str]:
    """Every version that shapes a run: Python, the packages, and torch's own build and device."""
    lines = [f"python {platform.python_version()} ({sys.executable})", f"platform {platform.platform()}"]
    lines += [f"{name} {installed(name) or 'not installed'}" for name in PACKAGES]
    try:
        import torch

        cuda = torch.cuda.is_available()
        lines += [
            f"torch.version.cuda {torch.version.cuda}",
            f"torch.version.git {getattr(torch.version, 'git_version', 'unknown')}",
            f"cudnn {torch.backends.cudnn.version() if cuda else None}",
            f"nccl {'.'.join(map(str, torch.cuda.nccl.version())) if cuda else None}",
            f"cuda available {cuda}",
        ]
        if cuda:
            capability = ".".join(map(str, torch.cuda.get_device_capability()))
            lines.append(f"device {torch.cuda.get_device_name()} (compute capability {capability})")
        from .device import driver_version

        lines.append(f"nvidia driver {driver_version()}")
    except Exception as exc:  # a broken install is itself worth recording
        lines.append(f"torch failed: {type(exc).__name__}: {exc}")
    return lines


def main() -> int:
    too_old = refusal()
    if too_old:
        print(too_old, file=sys.stderr)
        return 2
    for line in report():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
