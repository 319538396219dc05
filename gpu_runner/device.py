"""Where a boot runs: the device asked for, whether it can hold the boot, and its provenance.

Every check here happens before a model is allocated, so bad input fails fast and clearly.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from scheduler_core.errors import InvalidInput
from scheduler_core.measured import LoadNow

from .errors import BootOutOfMemory
from .presets import ModelConfig, estimate_bytes, graph_bytes
from .provenance import ProvenanceRecord

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
    need, (prefill, decode) = estimate_bytes(config, shapes, device.type)
    have = available_bytes(device)
    if need > have:
        raise InvalidInput(
            field,
            f"shape prefill={prefill} decode={decode} of preset {config.name} needs about "
            f"{need / GIB:.1f} GiB, more than the {have / GIB:.1f} GiB free on {device}",
        )


def check_graph_fits(config: ModelConfig, length: int, prefill: int, device: torch.device) -> None:
    """Before a graph is captured after boot (a longer key bucket a plan needs), its activations'
    estimate against the free memory: refused as out of memory in that shape, naming both."""
    if device.type != "cuda":
        return
    need, have = int(1.2 * graph_bytes(config, length, prefill, 0, device.type)), available_bytes(device)
    if need > have:
        raise BootOutOfMemory(
            f"out of memory in shape prefill={prefill} decode=0 of preset {config.name} on {device}: "
            f"its graph needs about {need / GIB:.2f} GiB by estimate, {have / GIB:.2f} GiB free"
        )


_ASKED = re.compile(r"(?:Tried to allocate|tried to allocate) ([0-9.]+ ?[KMGT]?i?B|[0-9]+ bytes)")


def _out_of_memory(exc: BaseException) -> BaseException | None:
    """The out-of-memory error behind `exc`, if any: one raised inside a graph capture surfaces as
    the capture's own error when the `torch.cuda.graph` block ends, with the OOM as its context."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, torch.OutOfMemoryError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _free_gib(device: torch.device) -> str:
    try:
        return f"{available_bytes(device) / GIB:.2f} GiB"
    except RuntimeError:  # a device left mid-capture may refuse the query
        return "an unknown amount"


@contextmanager
def shape_memory_guard(config: ModelConfig, device: torch.device, shape: tuple[int, int]) -> Iterator[None]:
    """Turn an out-of-memory error into one naming the shape, the memory asked for and the memory free."""
    try:
        yield
    except RuntimeError as exc:
        oom = _out_of_memory(exc)
        if oom is None:
            raise
        first = str(oom).splitlines()[0] if str(oom) else ""
        asked = _ASKED.search(first)
        raise BootOutOfMemory(
            f"out of memory in shape prefill={shape[0]} decode={shape[1]} of preset {config.name} on {device}: "
            f"asked for {asked.group(1) if asked else 'an unknown amount'}, {_free_gib(device)} free (torch: {first})"
        ) from exc


def code_revision() -> str:
    """`git rev-parse HEAD`; a GPU host receives the tree without `.git`, so there the revision comes
    from `HELIOS_CODE_REVISION` (scripts/gpu-run records it); else "unknown"."""
    given = os.environ.get("HELIOS_CODE_REVISION", "").strip()
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return given or "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else given or "unknown"


def process_started() -> str | None:
    """This process's start time (UTC, from /proc): tells boots in fresh processes apart."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot_time = next(
            int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    started = boot_time + ticks / os.sysconf("SC_CLK_TCK")
    return datetime.datetime.fromtimestamp(started, datetime.UTC).isoformat(timespec="milliseconds")


def driver_version() -> str | None:
    """The NVIDIA kernel driver's version (torch reports the CUDA runtime it was built with, not
    this): from /proc, else from NVML where nvidia-ml-py is installed (sandboxes may hide /proc's)."""
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
        found = re.search(r"\b(\d+\.\d+(?:\.\d+)?)\b", first)
        return found.group(1) if found else first.strip()
    except (OSError, IndexError):
        pass
    try:
        pynvml = _nvml()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # no NVML library, or it cannot reach the driver
        return None


def _nvml() -> Any:
    """NVML (nvidia-ml-py, where the GPU host has it), initialised; raises where it is absent."""
    import pynvml  # type: ignore[import-not-found]

    pynvml.nvmlInit()
    return pynvml


# What `nvidia-smi --query-gpu` reads for a timing's conditions; the throttle field's newer name
# first (drivers since 535 call them clock event reasons), the older one if it is refused.
SMI_FIELDS = (
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "power.draw",
    "power.limit",
    "temperature.gpu",
    "pstate",
    "clocks_event_reasons.active",
)
SMI_OLD_NAMES = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
SMI_KEYS = ("sm_mhz", "mem_mhz", "max_sm_mhz", "power_w", "power_limit_w", "temperature_c", "pstate", "throttle")
THROTTLE_BITS = {  # NVML's clocksEventReasons bits (nvml.h)
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def throttle_reasons(mask: int) -> list[str]:
    """The names of the set bits of a clock event (throttle) reasons mask; "none" for 0."""
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit] or ["none"]


def _number(text: str) -> float | str | None:
    text = text.strip()
    if text in ("", "[N/A]", "N/A", "[Not Supported]"):
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _from_smi(index: int) -> dict[str, Any] | None:
    for fields in (SMI_FIELDS, tuple(SMI_OLD_NAMES.get(f, f) for f in SMI_FIELDS)):
        try:
            out = subprocess.run(
                ["nvidia-smi", f"--id={index}", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        values = out.stdout.strip().split(",")
        if out.returncode == 0 and len(values) == len(fields):
            state: dict[str, Any] = dict(zip(SMI_KEYS, map(_number, values)))
            mask = state["throttle"]
            if isinstance(mask, str) and mask.startswith("0x"):
                state["throttle"] = throttle_reasons(int(mask, 16))
            state["source"] = "nvidia-smi"
            return state
    return None


def _from_nvml(index: int) -> dict[str, Any] | None:
    try:
        pynvml = _nvml()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        return {
            "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "max_sm_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
            "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "pstate": f"P{pynvml.nvmlDeviceGetPerformanceState(h)}",
            "throttle": throttle_reasons(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)),
            "source": "nvml",
        }
    except Exception:  # no NVML library, or it cannot reach the driver
        return None


def gpu_state(device: torch.device) -> dict[str, Any] | None:
    """The GPU's clocks, power, temperature and throttle reasons now (nvidia-smi, else NVML), so a
    stored timing says what conditions it ran in; None on CPU or where neither answers."""
    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else 0
    return _from_smi(index) or _from_nvml(index)


def host_load() -> LoadNow:
    """The machine's load now: the 1, 5 and 15 minute load averages and its cores. A timing taken
    beside other work (a shared CPU) reads slower than the plan costs, so each says what it ran beside."""
    return {"load_average": [round(x, 2) for x in os.getloadavg()], "cores": os.cpu_count()}


def provenance(config: ModelConfig, device: torch.device, seed: int) -> ProvenanceRecord:
    """What a stored boot must say about itself to be comparable with another: the device and its
    driver, the libraries, and the process it was measured in (each boot of a capture is its own)."""
    cuda = device.type == "cuda"
    name = torch.cuda.get_device_name(device) if cuda else f"cpu ({torch.get_num_threads()} threads)"
    return {
        "device": name,
        "mode": mode_of(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "driver": driver_version() if cuda else None,
        "python": platform.python_version(),
        "dtype": config.dtype,
        "preset": config.name,
        "seed": seed,
        "code_revision": code_revision(),
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "pid": os.getpid(),
        "process_started": process_started(),
    }
