"""Named execution profiles: what a launch of each shape costs on a real GPU, with provenance.

A profile is an execution model (`launch_ms(prefill, decode)`, `first_token_ms`) built from the
per-layer kernel timings of Llama-2-7B (fp16, one GPU) that Microsoft's Vidur simulator publishes;
the CSVs and their MIT notice sit in `llama-2-7b/` (its README.md: method, gaps, licence). A pass is
Vidur's own composition, 32 layers x (linear over the batch's tokens + each part's attention): a
prefill chunk attends after its cached tokens, decode rows attend their keys in all. How each part
is read between and past the samples is said by `ProfileExecution`'s methods; the fitted constants
(each cached token's cost, decode's `alpha`) by `derive`, and every profile's `provenance` repeats
it. Init costs 0 (the profiled pass has nothing that matches the loop's per-request init); the first
token adds an estimated 0.15 ms (embedding, LM head and sampling, which the profiles leave out).
`llama-2-7b-h100` has its linear part measured on H100 and its attention estimated as the A100
figure / 1.65 (no H100 attention file is available). The model's context is 4,096 tokens
(Llama-2): the step loop clips longer requests (`max_context`).
"""

from __future__ import annotations

import csv
import os
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import cache
from typing import Any

LAYERS = 32  # Llama-2-7B
MAX_CONTEXT = 4096  # Llama-2's context window: prompt and output together
DECODE_KV = 2048  # keys per row the decode table was sampled at: a decode row's reference context
H100_ATTENTION_DIVISOR = 1.65
FIRST_TOKEN_MS = 0.15
DATA_DIR = os.path.join(os.path.dirname(__file__), "llama-2-7b")
SOURCE = "Vidur's published profiles (microsoft/vidur, data/profiling/compute/), MIT licence; see {dir}/README.md"


@dataclass(frozen=True, eq=False)
class ProfileExecution:
    """A measured execution table, by component (per forward pass, ms): `linear` by total tokens on
    Vidur's grid, `prefill_attention` by chunk (0 cached tokens) with `prefill_per_cached` (s0, s1)
    for each cached token, `decode_attention` by rows at 2,048 keys a row with `decode_alpha`."""

    name: str
    linear: dict[int, float]
    prefill_attention: dict[int, float]
    decode_attention: dict[int, float]
    provenance: dict[str, Any]
    prefill_per_cached: tuple[float, float] = (0.0, 0.0)
    decode_alpha: float = 0.0
    first_token_ms: float = FIRST_TOKEN_MS
    init_ms: float = 0.0
    max_context: int | None = MAX_CONTEXT
    follows_context: bool = True
    _grid: tuple[int, ...] = field(init=False, repr=False)
    _chunks: tuple[int, ...] = field(init=False, repr=False)
    _top_rows: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_grid", tuple(sorted(self.linear)))
        object.__setattr__(self, "_chunks", tuple(sorted(self.prefill_attention)))
        object.__setattr__(self, "_top_rows", max(self.decode_attention))

    def linear_ms(self, tokens: int) -> float:
        """The linear operators over `tokens` tokens: the next grid point up (the cost steps with tile
        quantisation), proportional past the grid."""
        if tokens <= 0:
            return 0.0
        grid = self._grid
        if tokens > grid[-1]:
            return self.linear[grid[-1]] * tokens / grid[-1]
        return self.linear[grid[bisect_left(grid, tokens)]]

    def prefill_attention_ms(self, chunk: int, cached: int = 0) -> float:
        """Attention of a chunk after `cached` tokens: with none cached interpolated, flat below the
        smallest sample, quadratic past the largest; each cached token adds s0 + s1 x chunk."""
        if chunk <= 0:
            return 0.0
        chunks, table = self._chunks, self.prefill_attention
        if chunk <= chunks[0]:
            ms = table[chunks[0]]
        elif chunk >= chunks[-1]:
            ms = table[chunks[-1]] * (chunk / chunks[-1]) ** 2
        else:
            i = bisect_left(chunks, chunk)
            lo, hi = chunks[i - 1], chunks[i]
            ms = table[lo] + (table[hi] - table[lo]) * (chunk - lo) / (hi - lo)
        if cached > 0:
            s0, s1 = self.prefill_per_cached
            ms += cached * (s0 + s1 * chunk)
        return ms

    def decode_attention_ms(self, rows: int, context: int | None = None) -> float:
        """Decode attention of `rows` rows attending `context` keys in all (None: 2,048 a row, as the
        table was sampled): linear in the keys read, `alpha` being a row's work that does not grow with them."""
        if rows <= 0:
            return 0.0
        top = self._top_rows
        ms = self.decode_attention[rows] if rows <= top else self.decode_attention[top] * rows / top
        if context is None:
            return ms
        alpha = self.decode_alpha
        return ms * (alpha + context / rows) / (alpha + DECODE_KV)

    def launch_ms(self, prefill: int, decode: int = 0, cached: int = 0, context: int | None = None) -> float:
        """True duration of a launch of the graph (prefill tokens, decode rows), padding included,
        its prefill row after `cached` tokens and its decode rows attending `context` keys in all."""
        if prefill == 0 and decode == 0:
            return self.init_ms
        return (
            self.linear_ms(prefill + decode)
            + self.prefill_attention_ms(prefill, cached)
            + self.decode_attention_ms(decode, context)
        )

    def to_dict(self) -> dict[str, Any]:
        """How results name the profile (`execution`), and where its figures come from."""
        return {
            "execution": self.name,
            "first_token_ms": self.first_token_ms,
            "init_ms": self.init_ms,
            "max_context": self.max_context,
            "provenance": self.provenance,
        }


def _read(name: str) -> list[dict[str, str]]:
    with open(os.path.join(DATA_DIR, name), encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _per_pass(table: dict[int, list[float]], scale: float = 1.0) -> dict[int, float]:
    """Per-layer medians (averaged where a shape was sampled twice) as one forward pass's ms."""
    return {k: LAYERS * (sum(v) / len(v)) / scale for k, v in table.items()}


def _prefill_per_cached(samples: list[tuple[int, int, float]], at_zero: ProfileExecution) -> tuple[float, float]:
    """(s0, s1): least squares of what `cached` tokens add to a chunk's attention, `cached x (s0 + s1 x chunk)`."""
    sxx = sxy = syy = bx = by = 0.0
    for chunk, cached, ms in samples:
        extra = ms - at_zero.prefill_attention_ms(chunk)
        x, y = float(cached), float(cached * chunk)
        sxx, sxy, syy, bx, by = sxx + x * x, sxy + x * y, syy + y * y, bx + x * extra, by + y * extra
    det = sxx * syy - sxy * sxy
    return (bx * syy - by * sxy) / det, (sxx * by - sxy * bx) / det


def _decode_alpha(samples: list[tuple[int, int, float]], at_reference: ProfileExecution) -> float:
    """alpha in 0 ... 2,048 with the least squared relative error over the samples at up to 64 rows."""

    def error(alpha: int) -> float:
        return sum(
            ((at_reference.decode_attention_ms(b) * (alpha + kv) / (alpha + DECODE_KV) - ms) / ms) ** 2
            for b, kv, ms in samples
            if b <= at_reference._top_rows
        )

    return float(min(range(DECODE_KV + 1), key=error))


def derive(gpu: str) -> ProfileExecution:
    """Build `llama-2-7b-<gpu>` from the CSVs: the one derivation (tests re-derive it by hand)."""
    linear: dict[int, list[float]] = {}
    for row in _read(f"{gpu}-linear-per-layer.csv"):
        linear.setdefault(int(row["num_tokens"]), []).append(float(row["lin"]))
    prefill: dict[int, list[float]] = {}
    chunked: list[tuple[int, int, float]] = []  # (chunk, cached, one pass's ms) with tokens cached
    decode_at: list[tuple[int, int, float]] = []  # (rows, keys a row, one pass's ms) off 2,048 keys
    for row in _read("a100-attention-samples.csv"):
        chunk, kv, batch, ms = int(row["chunk"]), int(row["kv"]), int(row["batch"]), float(row["median_ms"])
        if row["kind"] == "prefill" and kv == 0 and batch == 1:
            prefill.setdefault(chunk, []).append(ms)
        elif row["kind"] == "prefill" and batch == 1:
            chunked.append((chunk, kv, LAYERS * ms))
        elif row["kind"] == "decode" and kv != DECODE_KV:
            decode_at.append((batch, kv, LAYERS * ms))
    decode: dict[int, list[float]] = {}
    for row in _read("a100-decode-attention-kv2048.csv"):
        decode.setdefault(int(row["batch_size"]), []).append(float(row["attn_decode_median_ms"]))
    divisor = 1.0 if gpu == "a100" else H100_ATTENTION_DIVISOR
    a100 = ProfileExecution("a100 attention", {1: 0.0}, _per_pass(prefill), _per_pass(decode), {})
    s0, s1 = _prefill_per_cached(chunked, a100)
    alpha = _decode_alpha(decode_at, a100)
    source = SOURCE.format(dir="scheduler_core/profiles/llama-2-7b")
    provenance: dict[str, Any] = {
        "model": f"Llama-2-7B, fp16, tensor parallel 1, context {MAX_CONTEXT} tokens",
        "gpu": gpu.upper(),
        "source": source,
        "linear": f"measured on {gpu.upper()} ({gpu}-linear-per-layer.csv)",
        "attention": "measured on A100 (FlashAttention)"
        if gpu == "a100"
        else f"estimated: the A100 figures / {H100_ATTENTION_DIVISOR} (no H100 attention profile is available)",
        "context": f"a chunk of N tokens after p cached: attention(N after 0) + p x ({s0 * divisor:.4g} + "
        f"{s1 * divisor:.4g} x N) ms a pass x {1 / divisor:.4g}; decode rows attending K keys: "
        f"table(b at {DECODE_KV} a row) x (alpha + K / b) / (alpha + {DECODE_KV}), alpha {alpha:g}, "
        f"fitted to the A100 samples at other contexts; a catalog's shapes at 0 cached and {DECODE_KV} a row",
        "max_context": f"{MAX_CONTEXT} tokens: a longer request's prompt is clipped so that prompt + output fit",
        "first_token_ms": f"{FIRST_TOKEN_MS} ms, estimated (embedding, LM head and sampling are not profiled)",
        "composition": "prefill N after p: 32 x (linear(N) + attention(N, p)); decode b: 32 x (linear(b) + "
        "decode attention(b, keys)); mixed: 32 x (linear(N + b) + both attentions)",
    }
    return ProfileExecution(
        f"llama-2-7b-{gpu}",
        _per_pass(linear),
        _per_pass(prefill, divisor),
        _per_pass(decode, divisor),
        provenance,
        (s0 / divisor, s1 / divisor),
        alpha,
    )


PROFILES: dict[str, str] = {"llama-2-7b-a100": "a100", "llama-2-7b-h100": "h100"}


@cache
def load_profile(name: str) -> ProfileExecution:
    """A shipped profile by name (read once per process)."""
    return derive(PROFILES[name])
