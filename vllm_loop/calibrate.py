"""From what a real vLLM was measured to take to the table `scheduler_core` simulates it with.

vLLM is measured from outside, as a client sees it (`probe.py`): a lone prompt's time to first
token at several lengths, and the gap between tokens with `k` requests decoding together. These
costs explain them, fitted by least squares:

- `request_ms`: what a request's TTFT holds besides the engine's steps (HTTP, the API server, the
  hand-over to the engine core). It runs in the API server's process, beside the engine's steps,
  so it must not occupy the simulated engine: the table's init launch `(0, 0)` costs nothing and
  `compare` adds `request_ms` to each simulated TTFT;
- a step carrying `c` prompt tokens costs `step_ms + prefill_ms_per_token * c +
  prefill_ms_per_token2 * c^2` (the square: attention within the chunk, which dominates a small
  model on a CPU; a prompt longer than the chunk budget takes several steps: that is what separates
  `request_ms` from `step_ms`). What a later chunk's attention to the chunks before it costs is not
  in a table keyed by shape: `prefill_residual_ms` shows how much that leaves unexplained;
- a decode step with `d` rows costs `decode_step_ms + decode_ms_per_row * d`; a step carrying both
  (vLLM puts the decoding requests in every step) costs one step's fixed part plus both slopes.

The table holds prefill graphs every `granularity` tokens up to the chunk budget (vLLM on a CPU
pads nothing; the simulator pads each tail to the next graph, at most `granularity - 1` tokens),
decode graphs of 1 to 64 rows and the mixed shapes of each; `MAX_GRAPHS` bounds how fine it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scheduler_core.catalog import MAX_GRAPHS

DECODE_ROWS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
MIXED_ROWS: tuple[int, ...] = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class Costs:
    """The fitted costs (ms) and how well they explain the measurements (largest residual, ms)."""

    request_ms: float
    step_ms: float
    prefill_ms_per_token: float
    prefill_ms_per_token2: float
    decode_step_ms: float
    decode_ms_per_row: float
    prefill_residual_ms: float
    decode_residual_ms: float

    def prefill(self, tokens: int) -> float:
        return self.step_ms + self.prefill_ms_per_token * tokens + self.prefill_ms_per_token2 * tokens * tokens

    def decode(self, rows: int) -> float:
        return self.decode_step_ms + self.decode_ms_per_row * rows

    def mixed(self, tokens: int, rows: int) -> float:
        return self.prefill(tokens) + self.decode_ms_per_row * rows

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 6) for k, v in asdict(self).items()}


def solve(rows: Sequence[Sequence[float]], ys: Sequence[float]) -> list[float]:
    """Least squares by the normal equations (a handful of unknowns), Gauss-Jordan with pivoting."""
    n = len(rows[0])
    a = [
        [sum(r[i] * r[j] for r in rows) for j in range(n)] + [sum(r[i] * y for r, y in zip(rows, ys))] for i in range(n)
    ]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-12:
            raise ValueError("the measurements cannot separate the costs: measure more lengths or row counts")
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
    return [a[i][n] / a[i][i] for i in range(n)]


def fit(ttft: Sequence[tuple[int, float]], itl: Sequence[tuple[int, float]], budget: int) -> Costs:
    """`ttft`: (prompt tokens, lone TTFT ms); `itl`: (decoding rows, inter-token gap ms);
    `budget`: vLLM's `max_num_batched_tokens` (a longer prompt's chunks are full budgets, then the rest)."""
    design = [[1.0, float(-(-n // budget)), float(n), float(sum(c * c for c in chunks(n, budget)))] for n, _ in ttft]
    request_ms, step_ms, per_token, per_token2 = solve(design, [y for _, y in ttft])
    decode_step, per_row = solve([[1.0, float(k)] for k, _ in itl], [y for _, y in itl])
    prefill_res = max(
        abs(request_ms + s * step_ms + n * per_token + q * per_token2 - y) for (_, s, n, q), (_, y) in zip(design, ttft)
    )
    decode_res = max(abs(decode_step + k * per_row - y) for k, y in itl)
    return Costs(
        max(request_ms, 0.0),
        max(step_ms, 0.0),
        max(per_token, 0.0),
        max(per_token2, 0.0),
        max(decode_step, 0.0),
        max(per_row, 0.0),
        prefill_res,
        decode_res,
    )


def chunks(n: int, budget: int) -> list[int]:
    """A lone prompt's steps under vLLM's own chunking: full budgets, then the rest."""
    return [budget] * (n // budget) + ([n % budget] if n % budget else [])


def capacities(budget: int, granularity: int) -> list[int]:
    caps = list(range(granularity, budget, granularity))
    return [*caps, budget]


def table(costs: Costs, budget: int, granularity: int) -> list[dict[str, Any]]:
    """The catalog `scheduler_core` reads (`{prefill, decode, ms}` rows), measured = true costs."""
    caps = capacities(budget, granularity)
    count = len(caps) * (1 + len(MIXED_ROWS)) + len(DECODE_ROWS)
    if count > MAX_GRAPHS:
        raise ValueError(f"{count} graphs at granularity {granularity}: at most {MAX_GRAPHS}; use a coarser one")
    # No init graph (0, 0): the simulator then counts a request's init as 0 ms, as `request_ms`
    # runs beside the engine (module docstring).
    rows = [{"prefill": c, "decode": 0, "ms": costs.prefill(c)} for c in caps]
    rows += [{"prefill": 0, "decode": d, "ms": costs.decode(d)} for d in DECODE_ROWS]
    rows += [{"prefill": c, "decode": d, "ms": costs.mixed(c, d)} for c in caps for d in MIXED_ROWS]
    return [{**r, "ms": round(r["ms"], 6)} for r in rows]


def finest_granularity(budget: int) -> int:
    """The smallest power-of-two step whose table fits `MAX_GRAPHS`."""
    g = 16
    while len(capacities(budget, g)) * (1 + len(MIXED_ROWS)) + len(DECODE_ROWS) > MAX_GRAPHS:
        g *= 2
    return g
