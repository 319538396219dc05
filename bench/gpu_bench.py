"""Speed of gpu_runner against the issue's targets. Prints figures next to the targets and never
fails on timing (machines vary): read it, don't gate on it.

    python bench/gpu_bench.py

CPU: a capture (one boot) of tiny's default catalog. GPU, when there is one: per-shape spread
(p90/p10) on a quiet device, graph replay vs eager launch for the 64-token shape, and the capture
of small's full default catalog.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from gpu_runner.analyses import ANALYSES
from gpu_runner.capture import time_launches
from gpu_runner.graphs import Boot
from gpu_runner.presets import PRESETS, default_shapes
from gpu_runner.timing import Stopwatch
from scheduler_core.analyses.params import ignore_events

CAPTURE = ANALYSES["capture"]
SAMPLES = 20


def report(name: str, value: float, unit: str, target: str, ok: bool | None) -> None:
    verdict = "" if ok is None else ("ok" if ok else "MISSES")
    print(f"{name:<52} {value:>9.2f} {unit:<3} target {target:<10} {verdict}")


def timed_capture(preset: str, device: str) -> tuple[float, dict]:
    params = CAPTURE.validate({"preset": preset, "device": device})
    began = time.perf_counter()
    result = CAPTURE.run(params, ignore_events)
    return time.perf_counter() - began, result


def replay_vs_eager(preset: str) -> float:
    """Eager launch time over graph replay time for the 64-token prefill shape (> 1: graphs help)."""
    boot = Boot(PRESETS[preset], torch.device("cuda"), [(64, 0)])
    boot.prepare([(64, 0)])
    launcher = boot.prefill_launcher(64)
    replay = statistics.median(time_launches(launcher, boot.device, SAMPLES))
    watch = Stopwatch(boot.device)
    for _ in range(SAMPLES):
        watch.time(launcher.eager)
    return statistics.median(watch.intervals_ms()) / replay


def main() -> None:
    shapes = len(default_shapes())
    seconds, _ = timed_capture("tiny", "cpu")
    report(f"CPU: capture of tiny's default catalog ({shapes} shapes)", seconds, "s", "<= 30 s", seconds <= 30)
    if not torch.cuda.is_available():
        for name in (
            "GPU: worst per-shape spread p90/p10 (small)",
            "GPU: eager / graph replay, 64-token shape",
            "GPU: capture of small's default catalog",
        ):
            print(f"{name:<52} skipped: no CUDA")
        return
    seconds, result = timed_capture("small", "cuda")
    spread = max(m["p90_ms"] / m["p10_ms"] for m in result["measurements"])
    report("GPU: worst per-shape spread p90/p10 (small)", spread, "x", "<= 1.05", spread <= 1.05)
    report("GPU: eager / graph replay, 64-token shape (small)", replay_vs_eager("small"), "x", "ratio", None)
    report(f"GPU: capture of small's default catalog ({shapes} shapes)", seconds, "s", "<= 60 s", seconds <= 60)


if __name__ == "__main__":
    main()
