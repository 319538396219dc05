"""The catalog an engine measures at start: each capacity's solo step time, warm-up then repeats.

The scheduler runs one calibration request per sample (a prompt of exactly the capacity, one
output token, alone in its step) and times the step as it times every step; this module decides
the order of the samples (warm-ups, then rounds of one repeat per capacity) and turns them into a
`scheduler_core` catalog (the fastest of the repeats: a neighbour on a shared host slows a step,
nothing makes one faster than the engine runs it, and spells of such slowing hit most repeats of a
capacity on a busy 2-core host, which a median then keeps) with its provenance.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler_core.catalog import DEFAULT_PREFILL_CAPACITIES, Catalog, Graph

WARMUP = 2
REPEATS = 9  # a round of the default capacities takes about 0.1 s on a CPU, far less on a GPU


def capacities_for(max_step_tokens: int, *preferred: Iterable[int]) -> tuple[int, ...]:
    """The capacities to measure, each no larger than a step may carry: those of the first of
    `preferred` (the recipe's, as the product names them; the engine's CUDA graph capture sizes)
    that has any, else the product's default capacities."""
    for sizes in (*preferred, DEFAULT_PREFILL_CAPACITIES):
        fitting = tuple(sorted({c for c in sizes if 0 < c <= max_step_tokens}))
        if fitting:
            return fitting
    raise ValueError(f"no capacity fits a step of {max_step_tokens} tokens (sizes {list(DEFAULT_PREFILL_CAPACITIES)})")


class Calibration:
    """The samples still to take (`next`) and those taken (`record`), then `catalog`."""

    def __init__(self, capacities: Iterable[int], warmup: int = WARMUP, repeats: int = REPEATS) -> None:
        self.capacities = tuple(capacities)
        self.warmup, self.repeats = warmup, repeats
        # Every warm-up first, then the repeats in rounds across the capacities: a slow spell of a
        # shared host (seconds, longer than all of one capacity's repeats) then slows one round,
        # which each capacity's median drops, not every repeat of one capacity (a boot measured
        # so put 1,024 tokens at 70 ms where the same engine served them in 26).
        warm = [(c, True) for c in self.capacities for _ in range(warmup)]
        self._plan = warm + [(c, False) for _ in range(repeats) for c in self.capacities]
        self._samples: dict[int, list[float]] = {c: [] for c in self.capacities}
        self.load_before = _load()

    def next(self) -> tuple[int, bool] | None:
        """(capacity, warm-up?) of the next sample, or None when every sample is taken."""
        return self._plan[0] if self._plan else None

    @property
    def remaining(self) -> int:
        return len(self._plan)

    def record(self, capacity: int, ms: float) -> None:
        """The step time of the sample `next` named."""
        expected, warm = self._plan.pop(0)
        if expected != capacity:
            raise ValueError(f"calibration sample for {capacity} tokens, expected {expected}")
        if not warm:
            self._samples[capacity].append(ms)

    def catalog(self) -> Catalog:
        return Catalog(tuple(Graph(c, 0, min(self._samples[c])) for c in self.capacities))

    def provenance(self, engine: Mapping[str, Any]) -> dict[str, Any]:
        """What a boot says about how it was measured (`engine`: vLLM version, device, model, dtype,
        padding), with the host's load before and after, as pages read it (`host_load`)."""
        return {
            **engine,
            "repeats": self.repeats,
            "warmup": self.warmup,
            "statistic": "fastest of the repeats",
            "samples_ms": {str(c): [round(ms, 4) for ms in self._samples[c]] for c in self.capacities},
            "host_load": {"before": self.load_before, "after": _load()},
        }


def _load() -> dict[str, Any]:
    return {"load_average": list(os.getloadavg()), "cores": os.cpu_count() or 1}
