"""Speed of gpu_runner against the issue's targets. Prints figures next to the targets and never
fails on timing (machines vary): read it, don't gate on it.

    python bench/gpu_bench.py

CPU: a capture (one boot, in a fresh process as every capture boot is) of tiny's default catalog,
and how much of it the new interpreter's start-up (spawn to torch imported) took. GPU, when there
is one: a 3-boot capture of small's default catalog, its worst per-graph spread (p90/p10), its
slowest boot, and graph replay vs eager launch per shape (scripts/gpu_check/targets.py, the same figures
`scripts/gpu-check` reports in its `targets` step).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from gpu_runner.analyses import ANALYSES
from gpu_runner.presets import default_shapes
from scheduler_core.analyses.contract import ignore_events
from scripts.gpu_check.targets import (
    BOOT_TARGET_S,
    FASTER,
    NO_SLOWER,
    SPREAD_TARGET,
    boot_seconds,
    is_host_bound,
    replay_vs_eager,
    spreads,
)

CAPTURE = ANALYSES["capture"]


def report(name: str, value: float, unit: str, target: str, ok: bool | None) -> None:
    verdict = "" if ok is None else ("ok" if ok else "MISSES")
    print(f"{name:<56} {value:>9.2f} {unit:<3} target {target:<10} {verdict}")


def timed_capture(preset: str, device: str, boots: int = 1) -> tuple[float, dict]:
    params = CAPTURE.validate({"preset": preset, "device": device, "boots": boots})
    began = time.perf_counter()
    result = CAPTURE.run(params, ignore_events)
    return time.perf_counter() - began, result


def main() -> None:
    shapes = default_shapes()
    seconds, result = timed_capture("tiny", "cpu")
    report(f"CPU: capture of tiny's default catalog ({len(shapes)} shapes)", seconds, "s", "<= 30 s", seconds <= 30)
    startup = result["provenance"]["startup_s"]
    report("CPU:   of which the boot process's start-up (torch import)", startup, "s", "", None)
    if not torch.cuda.is_available():
        for name in (
            "GPU: worst per-graph spread p90/p10 (small, 3 boots)",
            "GPU: slowest boot of small's default catalog",
            "GPU: least eager / replay, host-bound shapes (small)",
            "GPU: least eager / replay, larger prefills (small)",
        ):
            print(f"{name:<56} skipped: no CUDA")
        return
    _, result = timed_capture("small", "cuda", boots=3)
    spread = max(r["p90_over_p10"] for r in spreads(result))
    report(
        "GPU: worst per-graph spread p90/p10 (small, 3 boots)",
        spread,
        "x",
        f"<= {SPREAD_TARGET}",
        spread <= SPREAD_TARGET,
    )
    slowest = max(boot_seconds(result))
    report(
        f"GPU: slowest boot of small's default catalog ({len(shapes)} shapes)",
        slowest,
        "s",
        f"<= {BOOT_TARGET_S:.0f} s",
        slowest <= BOOT_TARGET_S,
    )
    speedups = replay_vs_eager("small", shapes)
    host = min(r["eager_over_replay"] for r in speedups if is_host_bound(r["prefill"], r["decode"]))
    device = min(r["eager_over_replay"] for r in speedups if not is_host_bound(r["prefill"], r["decode"]))
    report("GPU: least eager / replay, host-bound shapes (small)", host, "x", f">= {FASTER}", host >= FASTER)
    report("GPU: least eager / replay, larger prefills (small)", device, "x", f">= {NO_SLOWER}", device >= NO_SLOWER)


if __name__ == "__main__":
    main()
