"""The GPU benchmark targets, computed where `scripts/gpu-check` and `bench/gpu_bench.py` both read
them: measurement spread p90/p10 <= 1.05 per graph, graph replay faster than an eager launch per
shape, and a boot (spawn to catalog) <= 60 s."""

from __future__ import annotations

import statistics
from typing import Any

SPREAD_TARGET = 1.05
BOOT_TARGET_S = 60.0
SAMPLES = 10


def spreads(capture: dict[str, Any]) -> list[dict[str, Any]]:
    """p90/p10 of every graph in every boot of a capture result."""
    return [
        {"boot": b, "prefill": m["prefill"], "decode": m["decode"], "p90_over_p10": m["p90_ms"] / m["p10_ms"]}
        for b, boot in enumerate(capture.get("boots", [capture]))
        for m in boot["measurements"]
    ]


def boot_seconds(capture: dict[str, Any]) -> list[float]:
    return [boot["provenance"]["boot_s"] for boot in capture.get("boots", [capture])]


def replay_vs_eager(preset: str, shapes: list[tuple[int, int]], seed: int = 0) -> list[dict[str, Any]]:
    """Per shape, the median eager launch over the median graph replay (> 1: the graph helps),
    each after the same untimed warm-up, on seeded random token ids."""
    import torch

    from .capture import DEFAULT_WARMUP, load_timing_tokens, time_launches
    from .graphs import BootedModel
    from .presets import PRESETS
    from .timing import Stopwatch

    boot = BootedModel(PRESETS[preset], torch.device("cuda"), shapes, seed)
    boot.prepare(shapes)
    rows = []
    for shape in shapes:
        launcher = boot.launchers[shape]
        load_timing_tokens(boot, shape, seed)
        replay = statistics.median(time_launches(launcher, boot.device, SAMPLES))
        for _ in range(DEFAULT_WARMUP):
            launcher.eager()
        watch = Stopwatch(boot.device)
        for _ in range(SAMPLES):
            watch.time(launcher.eager)
        eager = statistics.median(watch.intervals_ms())
        rows.append(
            {
                "prefill": shape[0],
                "decode": shape[1],
                "replay_ms": replay,
                "eager_ms": eager,
                "eager_over_replay": eager / replay,
            }
        )
    return rows


def verdicts(capture: dict[str, Any], launches: list[dict[str, Any]]) -> dict[str, Any]:
    """Each target with its worst figure and whether it is met."""
    worst_spread = max(spreads(capture), key=lambda r: r["p90_over_p10"])
    slowest_boot = max(boot_seconds(capture))
    least_gain = min(launches, key=lambda r: r["eager_over_replay"])
    return {
        "spread": {
            "target": f"p90/p10 <= {SPREAD_TARGET} per graph",
            "worst": worst_spread,
            "met": worst_spread["p90_over_p10"] <= SPREAD_TARGET,
        },
        "replay_faster": {
            "target": "replay faster than eager per shape",
            "worst": least_gain,
            "met": least_gain["eager_over_replay"] > 1.0,
        },
        "boot_time": {
            "target": f"a boot <= {BOOT_TARGET_S:.0f} s",
            "worst_s": slowest_boot,
            "met": slowest_boot <= BOOT_TARGET_S,
        },
    }
