"""Real traffic for a real engine: a stored trace replayed on its own clock (time-scaled) through
vLLM's OpenAI-compatible `/v1/completions`, prompts as token ids, each answer streamed so the
client sees its first token and every gap after it.

A request is sent when its arrival comes due, from a thread of its own (at most `max_in_flight`
at once: past that, arrivals wait, and the result counts how late they were sent). Prompts are
seeded token ids (the trace holds lengths, not text; a dummy-weight model computes the same on any
ids), clipped to the model's context less the output. What comes back per request is what the
client measured: TTFT from the moment it was sent, the inter-token gaps, the tokens received.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from scheduler_core.scheduler import Arrival

REQUEST_TIMEOUT_S = 600.0
FIRST_ID = 3  # below it: Llama's special tokens (unk, bos, eos)


@dataclass(frozen=True)
class Served:
    """One request as the client measured it (times in ms; `sent_ms` on the replay's clock)."""

    id: int
    arrival_ms: float
    sent_ms: float
    prompt_tokens: int
    output_tokens: int
    ttft_ms: float | None
    itl_ms: tuple[float, ...]
    e2e_ms: float | None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        row["itl_ms"] = [round(x, 3) for x in self.itl_ms]
        return row


def prompt_ids(request_id: int, length: int, vocab: int) -> list[int]:
    """The same ids for the same request on every run (a replay under another policy sees the
    same prompt), none of them a special token."""
    rng = random.Random(request_id)
    return [rng.randrange(FIRST_ID, vocab) for _ in range(length)]


def clip(arrival: Arrival, max_context: int) -> tuple[int, int]:
    """Prompt and output lengths that fit the model's context (the output keeps at least 1)."""
    output = max(1, min(arrival.output_tokens, max_context - 1))
    return min(arrival.request.prompt_tokens, max_context - output), output


def complete(
    url: str, ids: Sequence[int], max_tokens: int, *, model: str = "helios", request_id: str | None = None
) -> tuple[float, list[float]]:
    """One streamed completion: (seconds to its first token, the times of each token after it),
    times from `time.perf_counter()`. Raises on an error answer. `request_id` is sent as
    `X-Request-Id`, which vLLM puts in its own request id (the plugin's records name it)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=REQUEST_TIMEOUT_S)
    body = {
        "model": model,
        "prompt": list(ids),
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
    }
    try:
        headers = {"Content-Type": "application/json"}
        if request_id is not None:
            headers["X-Request-Id"] = request_id
        conn.request("POST", "/v1/completions", json.dumps(body), headers)
        response = conn.getresponse()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {response.read(500).decode(errors='replace')}")
        return _token_times(response)
    finally:
        conn.close()


def _token_times(response: http.client.HTTPResponse) -> tuple[float, list[float]]:
    times: list[float] = []
    for line in _lines(response):
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        now = time.perf_counter()
        choices = event.get("choices") or []
        n = len(choices[0].get("token_ids") or []) if choices else 0
        times.extend([now] * max(1, n) if choices else [])
    if not times:
        raise RuntimeError("the stream ended with no token")
    return times[0], times[1:]


def _lines(response: http.client.HTTPResponse) -> Iterator[bytes]:
    while True:
        line = response.readline()
        if not line:
            return
        line = line.strip()
        if line:
            yield line


def replay(
    url: str,
    arrivals: Iterable[Arrival],
    *,
    vocab: int,
    max_context: int,
    max_in_flight: int = 64,
    on_done: Callable[[Served], None] | None = None,
    stop: threading.Event | None = None,
    tag: str | None = None,
) -> list[Served]:
    """Send every arrival when it comes due (an endless one until `stop`), then wait for every
    answer; the answers in the order they were sent. With `tag`, each is sent as request
    `<tag><id>` (`complete`'s `request_id`)."""
    slots = threading.BoundedSemaphore(max_in_flight)
    results: dict[int, Served] = {}
    threads: list[threading.Thread] = []
    stop = stop or threading.Event()
    start = time.perf_counter()
    for i, a in enumerate(arrivals):
        if stop.wait(max(0.0, start + a.arrival_ms / 1000.0 - time.perf_counter())):
            break
        slots.acquire()
        if stop.is_set():
            slots.release()
            break

        def one(i: int = i, a: Arrival = a) -> None:
            try:
                served = results[i] = _serve(url, a, start, vocab=vocab, max_context=max_context, tag=tag)
                if on_done is not None:
                    on_done(served)
            finally:
                slots.release()

        t = threading.Thread(target=one, name=f"request-{a.id}", daemon=True)
        t.start()
        threads = [*(x for x in threads if x.is_alive()), t]
    for t in threads:
        t.join()
    return [results[i] for i in sorted(results)]


def _serve(url: str, a: Arrival, start: float, *, vocab: int, max_context: int, tag: str | None) -> Served:
    prompt, output = clip(a, max_context)
    ids = prompt_ids(a.id, prompt, vocab)
    sent = time.perf_counter()
    sent_ms = (sent - start) * 1000
    try:
        first, rest = complete(url, ids, output, request_id=None if tag is None else f"{tag}{a.id}")
    except (OSError, RuntimeError, ValueError) as exc:
        return Served(a.id, a.arrival_ms, sent_ms, prompt, output, None, (), None, str(exc)[:300])
    times = [first, *rest]
    gaps = tuple((b - t) * 1000 for t, b in zip(times, times[1:]))
    return Served(
        a.id, a.arrival_ms, sent_ms, prompt, len(times), (first - sent) * 1000, gaps, (times[-1] - sent) * 1000
    )
