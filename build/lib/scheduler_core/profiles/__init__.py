"""Named execution profiles: what a launch of each shape costs on a real GPU, with provenance.

A profile is an execution model (`launch_ms(prefill, decode)`, `first_token_ms`) built from
per-layer kernel timings of Llama-2-7B (fp16, one GPU) that Microsoft's Vidur simulator
publishes; the CSVs and their MIT notice sit beside this file in `llama-2-7b/` (README.md there:
method, gaps, licence). How a launch is composed, per forward pass of 32 layers:

- prefill chunk of N tokens: 32 x (linear(N) + prefill attention(N new tokens after 0 cached));
- decode step of b rows: 32 x (linear(b) + decode attention(b sequences at 2,048 cached tokens));
- mixed (N tokens + b rows): 32 x (linear(N + b) + prefill attention(N) + decode attention(b)),
  Vidur's own composition: the linear operators run once over the batch's tokens, each attention
  kernel on its own part;
- init (0, 0): `init_ms`, 0 (the profiled pass has nothing that matches the loop's per-request init);
- first token: `first_token_ms`, 0.15 ms, the embedding, LM head and sampling that the profiles
  leave out ("about 0.1-0.2 ms"): an estimate.

Between Vidur's grid points (step 8 to 1024, 16 to 2048, 32 to 4096) the linear part takes the next
grid point up (the cost steps with tile quantisation), past 4,096 tokens it grows in proportion.
Prefill attention is interpolated linearly between the sampled chunks (64 ... 4,096) and grows with
the square of the chunk past 4,096; decode attention past 64 rows grows in proportion.
`llama-2-7b-h100` has its linear part measured on H100; its attention is estimated as the A100
figure / 1.65 (decode attention is bandwidth-bound; the README bounds prefill attention between 0
and the A100 figure). Every profile's `provenance` says the same, and its caveat: a chunk's attention is
costed as if nothing were cached before it (a catalog's shapes carry no prefix length), which
favours splitting (docs/analyses.md quantifies it).
"""

from __future__ import annotations

import csv
import os
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import cache
from typing import Any

LAYERS = 32  # Llama-2-7B
DECODE_KV = 2048  # cached tokens per sequence a decode step's attention is costed at
H100_ATTENTION_DIVISOR = 1.65
FIRST_TOKEN_MS = 0.15
DATA_DIR = os.path.join(os.path.dirname(__file__), "llama-2-7b")
SOURCE = "Vidur's published profiles (microsoft/vidur, data/profiling/compute/), MIT licence; see {dir}/README.md"


@dataclass(frozen=True, eq=False)
class ProfileExecution:
    """A measured execution table, by component (per forward pass, ms): `linear` by total tokens on
    Vidur's grid, `prefill_attention` by chunk (0 cached tokens), `decode_attention` by rows."""

    name: str
    linear: dict[int, float]
    prefill_attention: dict[int, float]
    decode_attention: dict[int, float]
    provenance: dict[str, Any]
    first_token_ms: float = FIRST_TOKEN_MS
    init_ms: float = 0.0
    _grid: tuple[int, ...] = field(init=False, repr=False)
    _chunks: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_grid", tuple(sorted(self.linear)))
        object.__setattr__(self, "_chunks", tuple(sorted(self.prefill_attention)))

    def linear_ms(self, tokens: int) -> float:
        """The linear operators over `tokens` tokens: the next grid point up, proportional past the grid."""
        if tokens <= 0:
            return 0.0
        grid = self._grid
        if tokens > grid[-1]:
            return self.linear[grid[-1]] * tokens / grid[-1]
        return self.linear[grid[bisect_left(grid, tokens)]]

    def prefill_attention_ms(self, chunk: int) -> float:
        """Attention of a chunk after no cached tokens: interpolated, flat below the smallest sample,
        quadratic past the largest."""
        if chunk <= 0:
            return 0.0
        chunks, table = self._chunks, self.prefill_attention
        if chunk <= chunks[0]:
            return table[chunks[0]]
        if chunk >= chunks[-1]:
            return table[chunks[-1]] * (chunk / chunks[-1]) ** 2
        i = bisect_left(chunks, chunk)
        lo, hi = chunks[i - 1], chunks[i]
        return table[lo] + (table[hi] - table[lo]) * (chunk - lo) / (hi - lo)

    def decode_attention_ms(self, rows: int) -> float:
        if rows <= 0:
            return 0.0
        top = max(self.decode_attention)
        return self.decode_attention[rows] if rows <= top else self.decode_attention[top] * rows / top

    def launch_ms(self, prefill: int, decode: int = 0) -> float:
        """True duration of a launch of the graph (prefill tokens, decode rows), padding included."""
        if prefill == 0 and decode == 0:
            return self.init_ms
        return self.linear_ms(prefill + decode) + self.prefill_attention_ms(prefill) + self.decode_attention_ms(decode)

    def shape_table(
        self, capacities: tuple[int, ...], decode_rows: tuple[int, ...] = (), mixed: tuple[tuple[int, int], ...] = ()
    ) -> dict[str, list[dict[str, float]]]:
        """The durations of the shapes a catalog captures, by kind (what a page or a doc shows)."""
        return {
            "prefill": [{"prefill": c, "ms": round(self.launch_ms(c), 6)} for c in capacities],
            "decode": [{"decode": d, "ms": round(self.launch_ms(0, d), 6)} for d in decode_rows],
            "mixed": [{"prefill": c, "decode": d, "ms": round(self.launch_ms(c, d), 6)} for c, d in mixed],
        }

    def to_dict(self) -> dict[str, Any]:
        """How results name the profile (`execution`), and where its figures come from."""
        return {
            "execution": self.name,
            "first_token_ms": self.first_token_ms,
            "init_ms": self.init_ms,
            "provenance": self.provenance,
        }


def _read(name: str) -> list[dict[str, str]]:
    with open(os.path.join(DATA_DIR, name), encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _per_pass(table: dict[int, list[float]], scale: float = 1.0) -> dict[int, float]:
    """Per-layer medians (averaged where a shape was sampled twice) as one forward pass's ms."""
    return {k: LAYERS * (sum(v) / len(v)) / scale for k, v in table.items()}


def derive(gpu: str) -> ProfileExecution:
    """Build `llama-2-7b-<gpu>` from the CSVs: the one derivation (tests re-derive it by hand)."""
    linear: dict[int, list[float]] = {}
    for row in _read(f"{gpu}-linear-per-layer.csv"):
        linear.setdefault(int(row["num_tokens"]), []).append(float(row["lin"]))
    prefill: dict[int, list[float]] = {}
    for row in _read("a100-attention-samples.csv"):
        if row["kind"] == "prefill" and row["kv"] == "0" and row["batch"] == "1":
            prefill.setdefault(int(row["chunk"]), []).append(float(row["median_ms"]))
    decode: dict[int, list[float]] = {}
    for row in _read("a100-decode-attention-kv2048.csv"):
        decode.setdefault(int(row["batch_size"]), []).append(float(row["attn_decode_median_ms"]))
    divisor = 1.0 if gpu == "a100" else H100_ATTENTION_DIVISOR
    source = SOURCE.format(dir="scheduler_core/profiles/llama-2-7b")
    provenance: dict[str, Any] = {
        "model": "Llama-2-7B, fp16, tensor parallel 1",
        "gpu": gpu.upper(),
        "source": source,
        "linear": f"measured on {gpu.upper()} ({gpu}-linear-per-layer.csv)",
        "attention": "measured on A100 (FlashAttention)"
        if gpu == "a100"
        else f"estimated: the A100 figures / {H100_ATTENTION_DIVISOR} (no H100 attention profile is available)",
        "decode_kv_tokens": DECODE_KV,
        "caveat": "each chunk's attention is costed after 0 cached tokens: splitting a long prompt looks "
        "cheaper than it is (A100: ~22 ms per 4,096 tokens in favour of smaller chunks)",
        "first_token_ms": f"{FIRST_TOKEN_MS} ms, estimated (embedding, LM head and sampling are not profiled)",
        "composition": "prefill N: 32 x (linear(N) + attention(N after 0 cached)); decode b: 32 x (linear(b) + "
        "decode attention(b at 2048 cached)); mixed: 32 x (linear(N + b) + both attentions)",
    }
    return ProfileExecution(
        f"llama-2-7b-{gpu}", _per_pass(linear), _per_pass(prefill, divisor), _per_pass(decode, divisor), provenance
    )


PROFILES: dict[str, str] = {"llama-2-7b-a100": "a100", "llama-2-7b-h100": "h100"}


@cache
def load_profile(name: str) -> ProfileExecution:
    """A shipped profile by name (read once per process)."""
    return derive(PROFILES[name])
