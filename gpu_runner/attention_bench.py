"""One layer's attention, as a prefill step runs it (the pinned kernel, grouped heads repeated, the
additive causal mask), timed alone for chunks of 64..4096 queries: after no cached tokens over the
chunk's own key bucket, after the most cached tokens Vidur sampled for that chunk, and over the
bucket a chunk ending at 16,384 would attend. Next to each, the published A100 kernel time where
Vidur has that point (`published.py`), and ours over it.

`python -m gpu_runner.attention_bench [--preset llama-2-7b] [--queries 64,...] [--out FILE.json]`
prints a table and writes JSON. It runs on CPU too (tiny, for a dry run of the code path).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

from .attention import takes_grouped_heads
from .device import gpu_state, resolve_device
from .model import DTYPES, chunk_mask, grouped_attention, key_bucket
from .presets import get_preset
from .published import attention_ms, longest_sampled_prefix
from .timing import Stopwatch

QUERIES = (64, 128, 256, 512, 1024, 2048, 4096)
LATE_END = 16384  # the late row: a chunk ending here, as the 14,000-token arm's last chunks do
WARMUP, SAMPLES = 5, 20


def time_attention(preset: str, queries: int, cached: int, device: torch.device) -> dict[str, Any]:
    """Median ms of one layer's attention for `queries` new tokens after `cached` ones."""
    config = get_preset(preset)
    keys = key_bucket(-(-(cached + queries) // 64) * 64, cached + queries)
    dtype = DTYPES[config.dtype]
    gen = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(1, config.heads, queries, config.head_dim, generator=gen, device=device, dtype=dtype)
    k = torch.randn(1, keys, config.kv_heads, config.head_dim, generator=gen, device=device, dtype=dtype)
    v = torch.randn_like(k)
    positions = cached + torch.arange(queries, device=device)
    mask = chunk_mask(keys, positions, positions[:1], dtype)
    kernel = config.attention_backend(device.type)
    groups = config.heads // config.kv_heads
    grouped = groups > 1 and takes_grouped_heads(kernel, device, dtype, config.heads, config.kv_heads, config.head_dim)
    run = lambda: grouped_attention(kernel, groups, q, k, v, mask, grouped)
    for _ in range(WARMUP):
        run()
    watch = Stopwatch(device)
    for _ in range(SAMPLES):
        watch.time(run)
    ms = statistics.median(watch.intervals_ms())
    return {"queries": queries, "cached": cached, "keys": keys, "kernel": kernel, "ms": ms}


def bench(preset: str, queries: tuple[int, ...], device: torch.device) -> dict[str, Any]:
    rows = []
    for n in queries:
        sampled = longest_sampled_prefix(n) if preset == "llama-2-7b" else None
        for cached in sorted({0, LATE_END - n, *([sampled] if sampled else [])}):
            row = time_attention(preset, n, cached, device)
            published = attention_ms(n, cached) if preset == "llama-2-7b" else None
            row["a100_published_ms"] = published
            row["ours_over_a100"] = row["ms"] / published if published else None
            rows.append(row)
    return {"preset": preset, "device": str(device), "gpu_state": gpu_state(device), "rows": rows}


def table(result: dict[str, Any]) -> list[str]:
    lines = [f"{'queries':>7} {'cached':>7} {'keys':>6} {'ours ms':>9} {'A100 ms':>8} {'ours/A100':>9}"]
    for r in result["rows"]:
        theirs = "-" if r["a100_published_ms"] is None else f"{r['a100_published_ms']:.3f}"
        ratio = "-" if r["ours_over_a100"] is None else f"{r['ours_over_a100']:.2f}"
        lines.append(f"{r['queries']:>7} {r['cached']:>7} {r['keys']:>6} {r['ms']:>9.3f} {theirs:>8} {ratio:>9}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_runner.attention_bench", description=__doc__)
    parser.add_argument("--preset", default="llama-2-7b")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--queries", default=",".join(map(str, QUERIES)))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    try:
        queries = tuple(int(q) for q in args.queries.split(","))
        get_preset(args.preset)
        device = resolve_device(args.device)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = bench(args.preset, queries, device)
    for line in table(result):
        print(line)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
