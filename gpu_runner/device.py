"""Where a boot runs: the device asked for, whether it can hold the boot, and its provenance.

Every check here happens before a model is allocated, so bad input fails fast and clearly.
"""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path
from typing import Any

import torch

from scheduler_core.errors import InvalidInput

from .presets import ModelConfig, estimate_bytes

GIB = 2**30


def resolve_device(name: str) -> torch.device:
    """`auto` takes CUDA when there is one; `cuda` without one is an error, never a silent CPU run."""
    if name == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if name == "cuda":
        raise InvalidInput(
            "device",
            f"cuda was asked for but no CUDA device is available "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda})",
        )
    return torch.device("cpu")


def mode_of(device: torch.device) -> str:
    return "cuda-graph" if device.type == "cuda" else "eager-cpu"


def available_bytes(device: torch.device) -> int:
    """Free memory, counting on CUDA what torch's caching allocator holds unused (an earlier boot's
    freed graphs and cache stay reserved there, and the driver counts them as taken)."""
    if device.type == "cuda":
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return torch.cuda.mem_get_info(device)[0] + cached
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("cannot read MemAvailable from /proc/meminfo")


def check_fits(
    config: ModelConfig, shapes: list[tuple[int, int]], device: torch.device, field: str = "capacities"
) -> None:
    """Refuse a boot whose estimated footprint exceeds the device's free memory, naming its largest shape."""
    need, (prefill, decode) = estimate_bytes(config, shapes)
    have = available_bytes(device)
    if need > have:
        raise InvalidInput(
            field,
            f"shape prefill={prefill} decode={decode} of preset {config.name} needs about "
            f"{need / GIB:.1f} GiB, more than the {have / GIB:.1f} GiB free on {device}",
        )


def code_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def provenance(config: ModelConfig, device: torch.device, seed: int) -> dict[str, Any]:
    """What a stored boot must say about itself to be comparable with another."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    return {
        "device": name,
        "mode": mode_of(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "dtype": config.dtype,
        "preset": config.name,
        "seed": seed,
        "code_revision": code_revision(),
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
