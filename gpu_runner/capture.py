"""One boot: capture a graph per catalog shape, time K launches of each, and turn the medians
into a scheduler_core catalog with the boot's provenance and every measurement's spread."""

from __future__ import annotations

import gc
import statistics
from typing import Any

import torch

from scheduler_core.catalog import Catalog

from .device import mode_of, provenance
from .drift import Disturbance
from .events import Progress, shape_label
from .graphs import Boot, Launcher
from .presets import ModelConfig
from .timing import Stopwatch, summary


def time_launches(
    launcher: Launcher, device: torch.device, repeats: int, disturbance: Disturbance | None = None
) -> list[float]:
    """K back-to-back launches, each timed on its own (CUDA events need no host sync between them)."""
    watch = Stopwatch(device)
    for _ in range(repeats):
        if disturbance is not None:
            disturbance.before_sample()
        watch.time(launcher.launch)
    return watch.intervals_ms()


def measure(boot: Boot, shape: tuple[int, int], repeats: int, drift_load: int | None) -> dict[str, Any]:
    """One shape's measurement; with `drift_load`, timed under competing work, and timed again
    without it so the over-measure is visible (`clean_median_ms`)."""
    launcher = boot.launchers[shape]
    prefill, decode = shape
    row: dict[str, Any] = {"prefill": prefill, "decode": decode}
    if drift_load is None:
        row.update(summary(time_launches(launcher, boot.device, repeats)))
    else:
        with Disturbance(boot.device, drift_load) as disturbance:
            row.update(summary(time_launches(launcher, boot.device, repeats, disturbance)))
        row["clean_median_ms"] = statistics.median(time_launches(launcher, boot.device, repeats))
    row.update(capture_ms=boot.capture_ms[shape], mode=mode_of(boot.device), drifted=drift_load is not None)
    return row


def capture_boot(
    config: ModelConfig,
    device: torch.device,
    shapes: list[tuple[int, int]],
    *,
    repeats: int,
    seed: int,
    drift_capacities: tuple[int, ...] = (),
    drift_load: int = 2,
    steps: Progress,
    boot_index: int = 0,
) -> tuple[Boot, dict[str, Any]]:
    """Boot the model, capture every shape, measure them in catalog order, streaming each
    measurement. Returns the live boot (to execute plans on) and its stored form."""
    meta = provenance(config, device, seed)
    # A deliberately disturbed boot says so wherever it is stored: its catalog over-measures these.
    meta["drift"] = {"capacities": sorted(drift_capacities), "load": drift_load} if drift_capacities else None
    boot = Boot(config, device, shapes, seed)
    boot.prepare(shapes)
    steps.advance(f"boot {boot_index}: captured {len(shapes)} graphs")
    measurements = []
    for shape in shapes:
        disturbed = shape[1] == 0 and shape[0] in drift_capacities
        row = measure(boot, shape, repeats, drift_load if disturbed else None)
        measurements.append(row)
        steps.emit({"type": "measurement", "boot": boot_index, "shape": shape_label(*shape), **row})
        steps.advance(f"boot {boot_index}: prefill={shape[0]} decode={shape[1]}")
    return boot, {"provenance": meta, "catalog": catalog_dicts(measurements), "measurements": measurements}


def catalog_dicts(measurements: list[dict[str, Any]], key: str = "median_ms") -> list[dict[str, Any]]:
    """The catalog a scheduler reads: shape and median only, validated by Catalog.from_dicts."""
    rows = [{"prefill": m["prefill"], "decode": m["decode"], "ms": m.get(key, m["median_ms"])} for m in measurements]
    return Catalog.from_dicts(rows).to_dicts()


def free_device_memory(device: torch.device) -> None:
    """Return a dropped boot's graphs, pool and cache to the device before the next boot, as an
    engine restart would (the memory check assumed one boot at a time)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
