"""One boot: capture a graph per catalog shape, time K launches of each after W untimed warm-up
launches, and turn the medians into a scheduler_core catalog with the boot's provenance and every
measurement's spread. A capture job runs each boot in a fresh process (`fresh_boot.py`)."""

from __future__ import annotations

import statistics
from typing import Any

import torch

from scheduler_core.catalog import Catalog

from .device import mode_of, provenance, shape_memory_guard
from .drift import Disturbance
from .events import Progress, shape_label
from .execute import random_token_ids
from .graphs import BootedModel, Launcher
from .presets import ModelConfig
from .timing import Stopwatch, summary

DEFAULT_WARMUP = 3


def time_launches(
    launcher: Launcher,
    device: torch.device,
    repeats: int,
    disturbance: Disturbance | None = None,
    warmup: int = DEFAULT_WARMUP,
) -> list[float]:
    """`warmup` untimed launches (a graph's first replays pay for lazy initialisation), then K
    back-to-back launches, each timed on its own (CUDA events need no host sync between them)."""
    for _ in range(warmup):
        launcher.launch()
    watch = Stopwatch(device)
    for _ in range(repeats):
        if disturbance is not None:
            disturbance.before_sample()
        watch.time(launcher.launch)
    return watch.intervals_ms()


def load_timing_tokens(boot: BootedModel, shape: tuple[int, int], seed: int) -> None:
    """Seeded random token ids in a shape's static buffer, drawn as TTFT's prompts are: timing
    then runs the rows a real prompt would (all-zero ids would make every activation row equal)."""
    step = boot.launchers[shape].step
    step.tokens.copy_(random_token_ids(boot.config.vocab, step.prefill + step.decode, seed, boot.device))


def measure(
    boot: BootedModel, shape: tuple[int, int], repeats: int, warmup: int, drift_load: int | None
) -> dict[str, Any]:
    """One shape's measurement; with `drift_load`, timed under competing work, then timed again
    without it: `clean_median_ms`, and the slowdown the drift achieved on this shape."""
    launcher = boot.launchers[shape]
    prefill, decode = shape
    row: dict[str, Any] = {"prefill": prefill, "decode": decode}
    if drift_load is None:
        row.update(summary(time_launches(launcher, boot.device, repeats, warmup=warmup)))
    else:
        with Disturbance(boot.device, drift_load) as disturbance:
            row.update(summary(time_launches(launcher, boot.device, repeats, disturbance, warmup)))
        row["clean_median_ms"] = statistics.median(time_launches(launcher, boot.device, repeats, warmup=warmup))
        row["drift_slowdown"] = row["median_ms"] / row["clean_median_ms"]
    row.update(
        warmup=warmup, capture_ms=boot.capture_ms[shape], mode=mode_of(boot.device), drifted=drift_load is not None
    )
    return row


def capture_boot(
    config: ModelConfig,
    device: torch.device,
    shapes: list[tuple[int, int]],
    *,
    repeats: int,
    seed: int,
    warmup: int = DEFAULT_WARMUP,
    drift_capacities: tuple[int, ...] = (),
    drift_load: int = 2,
    steps: Progress,
    boot_index: int = 0,
) -> tuple[BootedModel, dict[str, Any]]:
    """Boot the model, capture every shape, measure them in catalog order, streaming each
    measurement. Returns the live boot (to execute plans on) and its stored form."""
    meta = provenance(config, device, seed)
    boot = BootedModel(config, device, shapes, seed)
    boot.prepare(shapes)
    meta["attention"] = boot.attention
    steps.advance(f"boot {boot_index}: captured {len(shapes)} graphs")
    measurements = []
    for shape in shapes:
        disturbed = shape[1] == 0 and shape[0] in drift_capacities
        with shape_memory_guard(config, device, shape):
            load_timing_tokens(boot, shape, seed)
            row = measure(boot, shape, repeats, warmup, drift_load if disturbed else None)
        measurements.append(row)
        steps.emit({"type": "measurement", "boot": boot_index, "shape": shape_label(*shape), **row})
        steps.advance(f"boot {boot_index}: prefill={shape[0]} decode={shape[1]}")
    # A deliberately disturbed boot says so wherever it is stored: its catalog over-measures these,
    # each by the slowdown achieved (its median over its undisturbed median in this boot).
    meta["drift"] = (
        {
            "capacities": sorted(drift_capacities),
            "load": drift_load,
            "achieved": [
                {"prefill": m["prefill"], "slowdown": m["drift_slowdown"]}
                for m in sorted(measurements, key=lambda m: m["prefill"])
                if m["drifted"]
            ],
        }
        if drift_capacities
        else None
    )
    stored = {
        "provenance": meta,
        "catalog": catalog_of(measurements).to_dicts(),  # the result is JSON
        "measurements": measurements,
        "output_fingerprint": output_fingerprint(boot, shapes[0]),
    }
    return boot, stored


def output_fingerprint(boot: BootedModel, shape: tuple[int, int]) -> float:
    """The sum of a shape's last launch's logits: equal across boots of one model and seed, so two
    boots' catalogs can be shown to differ only in their timing."""
    return float(boot.launchers[shape].launch().double().sum())


def catalog_of(measurements: list[dict[str, Any]], key: str = "median_ms") -> Catalog:
    """The catalog a scheduler reads, built once from a capture's measurements: shape and median
    (or `key`) only, validated as every catalog is (`Catalog.from_dicts`)."""
    rows = [{"prefill": m["prefill"], "decode": m["decode"], "ms": m.get(key, m["median_ms"])} for m in measurements]
    return Catalog.from_dicts(rows)
