"""vLLM's decode steps, which a boot does not hold: `k` requests decoding together, each sent as
request `hcprobe<k>x<i>` so the plugin's records give the engine's own gaps between their tokens
(the client's are also kept: its tokens can arrive in bursts)."""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Sequence

from . import driver

ROWS: tuple[int, ...] = (1, 4, 16)
DECODE_TOKENS = 24  # tokens each decoding request generates
SKIPPED_GAPS = 4  # of each request's first gaps: the others are still prefilling


def pass_name(rows: int) -> str:
    """The pass of the probe's requests decoding `rows` together: each is request `hc<pass>x<i>`."""
    return f"probe{rows}"


def steady(gaps: Sequence[float]) -> list[float]:
    """A decoding request's gaps once the others have started decoding too."""
    return list(gaps[SKIPPED_GAPS:])


def decode_gap(url: str, rows: int, vocab: int) -> float:
    """Median gap (ms) between tokens, as the client saw them, while `rows` requests decode
    together (short prompts, sent at once)."""
    gaps: list[float] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        ids = driver.prompt_ids(20_000_000 + rows * 1000 + i, 16, vocab)
        first, rest = driver.complete(url, ids, DECODE_TOKENS, request_id=f"hc{pass_name(rows)}x{i}")
        times = [first, *rest]
        with lock:
            gaps.extend(steady([(b - a) * 1000 for a, b in zip(times, times[1:])]))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(rows)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statistics.median(gaps)


def measure(
    url: str, *, vocab: int, rows: Sequence[int] = ROWS, on_progress: Callable[[str], None] = lambda m: None
) -> dict[str, list[list[float]]]:
    """`{"itl": [[rows, ms], ...]}`: the client's median gap at each row count."""
    itl = []
    for k in rows:
        itl.append([k, round(decode_gap(url, k, vocab), 3)])
        on_progress(f"decode gap with {k} rows: {itl[-1][1]:.2f} ms")
    return {"itl": itl}
