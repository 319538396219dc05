"""From what a real vLLM was measured to take to the table `scheduler_core` simulates it with.

The boot holds each capacity's solo prefill step, timed inside the engine by the plugin. What it
does not hold are the steps that carry decoding requests; `probe.py` makes them, `k` requests
decoding together, and the gaps between their tokens (the engine's own, from the plugin's request
records) fit:

- a decode step with `d` rows costs `decode_step_ms + decode_ms_per_row * d`;
- a step carrying a prefill chunk and `d` decoding rows (vLLM puts every decoding request in every
  step) costs the chunk's solo step and `decode_ms_per_row` for each row.

The table has no init graph `(0, 0)`: what a request's TTFT holds besides the engine's steps (HTTP,
the API server) runs beside the engine, so `compare` adds it to each simulated TTFT instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

DECODE_ROWS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
MIXED_ROWS: tuple[int, ...] = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class Costs:
    """The fitted decode costs (ms) and how well they explain the measurements (largest residual)."""

    decode_step_ms: float
    decode_ms_per_row: float
    decode_residual_ms: float

    def decode(self, rows: int) -> float:
        return self.decode_step_ms + self.decode_ms_per_row * rows

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 6) for k, v in asdict(self).items()}


def fit(itl: Sequence[tuple[int, float]]) -> Costs:
    """`itl`: (decoding rows, gap between two tokens in ms), at two row counts or more; least squares."""
    n = len(itl)
    mean_k = sum(k for k, _ in itl) / n
    mean_y = sum(y for _, y in itl) / n
    spread = sum((k - mean_k) ** 2 for k, _ in itl)
    if spread == 0:
        raise ValueError("the decode gaps cannot separate a step's cost from a row's: measure two row counts")
    per_row = sum((k - mean_k) * (y - mean_y) for k, y in itl) / spread
    step = mean_y - per_row * mean_k
    residual = max(abs(step + per_row * k - y) for k, y in itl)
    return Costs(max(step, 0.0), max(per_row, 0.0), residual)


def engine_table(solo: list[dict[str, Any]], costs: Costs) -> list[dict[str, Any]]:
    """The table the simulator runs (`{prefill, decode, ms}` rows): the boot's solo prefill steps,
    the fitted decode steps, and each solo step with decode rows beside it."""
    rows = [*solo, *({"prefill": 0, "decode": d, "ms": costs.decode(d)} for d in DECODE_ROWS)]
    rows += [
        {"prefill": g["prefill"], "decode": d, "ms": g["ms"] + costs.decode_ms_per_row * d}
        for g in solo
        for d in MIXED_ROWS
    ]
    return [{**r, "ms": round(r["ms"], 6)} for r in rows]
