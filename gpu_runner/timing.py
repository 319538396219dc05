"""How time is read: CUDA events on a GPU (device time, no host sync between launches), and
perf_counter on CPU, where eager calls finish before they return."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


class Stopwatch:
    """Times a series of intervals on one device; `intervals_ms()` waits for the device once."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._marks: list[tuple[Any, Any]] = []

    def time(self, fn: Callable[[], Any]) -> Any:
        start: Any
        end: Any
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            end.record()
        else:
            start = time.perf_counter()
            out = fn()
            end = time.perf_counter()
        self._marks.append((start, end))
        return out

    def intervals_ms(self) -> list[float]:
        if self.cuda:
            torch.cuda.synchronize()
            return [s.elapsed_time(e) for s, e in self._marks]
        return [(e - s) * 1000.0 for s, e in self._marks]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def summary(samples: list[float]) -> dict[str, float | int]:
    """Median and the 10th/90th percentiles (inclusive deciles; one sample is its own spread)."""
    deciles = statistics.quantiles(samples, n=10, method="inclusive") if len(samples) > 1 else samples * 9
    return {
        "median_ms": statistics.median(samples),
        "p10_ms": deciles[0],
        "p90_ms": deciles[8],
        "samples": len(samples),
    }
