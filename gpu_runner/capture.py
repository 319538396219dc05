"""One boot: capture a graph per catalog shape, warm each up until its timings settle (at least W
untimed launches, bounded), time K launches, and turn the medians into a scheduler_core catalog
with the boot's provenance and every measurement's spread. Shapes are measured in a seeded random
order, so a drift over the boot (clocks warming, another tenant) does not always land on the same
graphs. A capture job runs each boot in a fresh process (`fresh_boot.py`)."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

import torch

from scheduler_core.catalog import Catalog

from .device import gpu_state, host_load, mode_of, provenance, shape_memory_guard
from .drift import Disturbance
from .events import Progress, shape_label
from .execute import random_token_ids
from .graphs import BootedModel, Launcher
from .presets import ModelConfig
from .provenance import DriftAchieved, DriftRecord
from .timing import Stopwatch, summary

DEFAULT_WARMUP = 3
SETTLE_WINDOW = 3  # launches per settling window: their median is compared with the last window's
SETTLE_TOLERANCE = 0.02  # settled when two windows' medians agree within 2 %
SETTLE_MAX_LAUNCHES = 30  # the bound: warm-up never runs more than this many launches past the minimum ...
SETTLE_MAX_S = 3.0  # ... nor longer than this (a 4096 CPU call takes most of a second)


def settle(launcher: Launcher, device: torch.device, minimum: int) -> tuple[int, bool]:
    """Untimed warm-up until the timings settle: `minimum` launches, then windows of
    SETTLE_WINDOW until two in a row have medians within SETTLE_TOLERANCE, bounded by
    SETTLE_MAX_LAUNCHES and SETTLE_MAX_S. Returns the launches spent and whether they settled."""
    for _ in range(minimum):
        launcher.launch()
    spent, previous, began = minimum, None, time.perf_counter()
    while spent - minimum < SETTLE_MAX_LAUNCHES and time.perf_counter() - began < SETTLE_MAX_S:
        watch = Stopwatch(device)
        for _ in range(SETTLE_WINDOW):
            watch.time(launcher.launch)
        spent += SETTLE_WINDOW
        median = statistics.median(watch.intervals_ms())
        if previous is not None and abs(median - previous) <= SETTLE_TOLERANCE * previous:
            return spent, True
        previous = median
    return spent, False


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
    spent, settled = settle(launcher, boot.device, warmup)
    if drift_load is None:
        row.update(summary(time_launches(launcher, boot.device, repeats, warmup=0)))
    else:
        with Disturbance(boot.device, drift_load) as disturbance:
            row.update(summary(time_launches(launcher, boot.device, repeats, disturbance, 0)))
        row["clean_median_ms"] = statistics.median(time_launches(launcher, boot.device, repeats, warmup=warmup))
        row["drift_slowdown"] = row["median_ms"] / row["clean_median_ms"]
    row.update(
        warmup=spent,
        settled=settled,
        capture_ms=boot.capture_ms[shape],
        mode=mode_of(boot.device),
        drifted=drift_load is not None,
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
    """Boot the model, capture every shape, measure them in a seeded random order, streaming each
    measurement; the GPU's clocks, power and throttle reasons, and the host's load, are read before and after. Returns the live boot (to execute plans on) and its stored form."""
    meta = provenance(config, device, seed)
    boot = BootedModel(config, device, shapes, seed)
    boot.prepare(shapes)
    meta["attention"] = boot.attention
    steps.advance(f"boot {boot_index}: captured {len(shapes)} graphs")
    meta["gpu_state"] = {"before": gpu_state(device)}
    meta["host_load"] = {"before": host_load()}
    meta["repeats"] = repeats
    order = list(shapes)
    random.Random(seed * 1000 + boot_index).shuffle(order)  # seeded: the same boot measures in the same order
    meta["order"] = [shape_label(*s) for s in order]
    measured: dict[tuple[int, int], dict[str, Any]] = {}
    for shape in order:
        disturbed = shape[1] == 0 and shape[0] in drift_capacities
        with shape_memory_guard(config, device, shape):
            load_timing_tokens(boot, shape, seed)
            row = measure(boot, shape, repeats, warmup, drift_load if disturbed else None)
        measured[shape] = row
        steps.emit({"type": "measurement", "boot": boot_index, "shape": shape_label(*shape), **row})
        steps.advance(f"boot {boot_index}: prefill={shape[0]} decode={shape[1]}")
    meta["gpu_state"]["after"] = gpu_state(device)
    meta["host_load"]["after"] = host_load()
    measurements = [measured[s] for s in shapes]  # stored in catalog order
    # A deliberately disturbed boot says so wherever it is stored: its catalog over-measures these,
    # each by the slowdown achieved (its median over its undisturbed median in this boot).
    drifted = sorted((m for m in measurements if m["drifted"]), key=lambda m: m["prefill"])
    achieved: list[DriftAchieved] = [{"prefill": m["prefill"], "slowdown": m["drift_slowdown"]} for m in drifted]
    drift: DriftRecord = {"capacities": sorted(drift_capacities), "load": drift_load, "achieved": achieved}
    meta["drift"] = drift if drift_capacities else None
    stored = {
        "provenance": meta,
        "catalog": catalog_of(measurements).to_dicts(),  # the result is JSON
        "measurements": measurements,
        "output_fingerprint": output_fingerprint(boot, shapes[0]),
    }
    return boot, stored


def isolated_ms(
    boot: BootedModel, base_ms: dict[int, float], launches: list[tuple[int, int]], repeats: int, warmup: int, seed: int
) -> dict[tuple[int, int], float]:
    """Median device time of each graph that `launches` ([(capacity, start)]) run, timed alone, by
    (capacity, keys): a catalog shape's is its measurement (`base_ms`); a longer key bucket's is
    timed here, its chunk placed at the end of the bucket, after the same settling warm-up."""
    alone: dict[tuple[int, int], float] = {}
    for capacity, start in launches:
        launcher = boot.prefill_launcher(capacity, start)
        key = (capacity, launcher.step.keys)
        if key in alone:
            continue
        if launcher is boot.launchers[(capacity, 0)]:
            alone[key] = base_ms[capacity]
            continue
        with shape_memory_guard(boot.config, boot.device, (capacity, 0)):
            launcher.step.tokens.copy_(random_token_ids(boot.config.vocab, capacity, seed, boot.device))
            launcher.step.start.fill_(launcher.step.keys - capacity)
            settle(launcher, boot.device, warmup)
            alone[key] = statistics.median(time_launches(launcher, boot.device, repeats, warmup=0))
    return alone


def output_fingerprint(boot: BootedModel, shape: tuple[int, int]) -> float:
    """The sum of a shape's last launch's logits: equal up to float32 rounding across boots of one
    model and seed (kernels need not round alike in two processes), so two boots' catalogs can be
    shown to differ only in their timing."""
    return float(boot.launchers[shape].launch().double().sum())


def catalog_of(measurements: list[dict[str, Any]], key: str = "median_ms") -> Catalog:
    """The catalog a scheduler reads, built once from a capture's measurements: shape and median
    (or `key`) only, validated as every catalog is (`Catalog.from_dicts`)."""
    rows = [{"prefill": m["prefill"], "decode": m["decode"], "ms": m.get(key, m["median_ms"])} for m in measurements]
    return Catalog.from_dicts(rows)
