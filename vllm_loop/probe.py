"""vLLM measured from outside, as `calibrate.fit` takes it: a lone prompt's TTFT at several
lengths, and the gap between tokens with `k` requests decoding together; each after a warm-up,
the median of `repeats`."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence

from . import driver

PROMPTS: tuple[int, ...] = (16, 256, 1024, 2048, 3072, 4096)
ROWS: tuple[int, ...] = (1, 4, 16)
DECODE_TOKENS = 24  # tokens each decoding request generates (its first few gaps are skipped)


def lone_ttft(url: str, tokens: int, repeats: int, vocab: int) -> float:
    """Median TTFT (ms) of a lone prompt of `tokens`, one output token, fresh ids each time (no
    prefix cache hit)."""
    times = []
    for r in range(repeats + 1):
        ids = driver.prompt_ids(10_000_000 + tokens * 100 + r, tokens, vocab)
        sent = time.perf_counter()
        first, _ = driver.complete(url, ids, 1)
        times.append((first - sent) * 1000)
    return statistics.median(times[1:])  # the first is the warm-up


def decode_gap(url: str, rows: int, vocab: int) -> float:
    """Median gap (ms) between tokens while `rows` requests decode together (short prompts, sent
    at once; the gaps of each request's first 4 tokens skipped: the others are still prefilling)."""
    gaps: list[float] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        first, rest = driver.complete(url, driver.prompt_ids(20_000_000 + rows * 1000 + i, 16, vocab), DECODE_TOKENS)
        times = [first, *rest]
        with lock:
            gaps.extend((b - a) * 1000 for a, b in zip(times[4:], times[5:]))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(rows)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statistics.median(gaps)


def measure(
    url: str,
    *,
    vocab: int,
    repeats: int = 3,
    prompts: Sequence[int] = PROMPTS,
    rows: Sequence[int] = ROWS,
    on_progress: Callable[[str], None] = lambda m: None,
) -> dict[str, list[list[float]]]:
    """`{"ttft": [[tokens, ms], ...], "itl": [[rows, ms], ...]}`."""
    ttft = []
    for n in prompts:
        ttft.append([n, round(lone_ttft(url, n, repeats, vocab), 3)])
        on_progress(f"lone TTFT at {n} tokens: {ttft[-1][1]:.1f} ms")
    itl = []
    for k in rows:
        itl.append([k, round(decode_gap(url, k, vocab), 3)])
        on_progress(f"decode gap with {k} rows: {itl[-1][1]:.2f} ms")
    return {"ttft": ttft, "itl": itl}
