"""A worked example: a vLLM-style scheduler step mapped to Helios launch and request records.

A step that carries a prefill chunk knows the chunk's request id (`cmpl-...`), the prompt tokens
already computed (`num_computed_tokens`) and those it adds (`num_new_tokens`, unpadded), and the
CUDA graph it replayed (`cudagraph_size`, None when eager); a finished request knows when it
arrived and when each token came. `StepMapper` turns those into one `LaunchRecord` per prefill
chunk and one `RequestRecord` per finished request, each with the policy and version the engine ran
under (`PolicyWatcher.current`); `docs/engines.md` (section 5) tabulates the mapping field by field.
Run it against a stack (`./dev up`) with a token from `manage.py create_api_token --engine NAME`,
naming the same engine (a token posts only as its own engine):

    python clients/python/examples/vllm_step.py http://127.0.0.1:8000 tiny-cpu heng_... NAME

It exits 0 once every record it sent is stored, 1 when any was refused or dropped (the reason is
in the reporter's log line), 2 on wrong arguments.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from helios_client import LaunchRecord, Policy, PolicyWatcher, RequestRecord, TelemetryReporter


@dataclass(frozen=True)
class PrefillChunk:
    """What a vLLM-style scheduler knows of one prefill chunk it scheduled in a step."""

    request_id: str
    num_computed_tokens: int  # prompt tokens already in the KV cache
    num_new_tokens: int  # prompt tokens this step computes (unpadded)


@dataclass(frozen=True)
class Step:
    """One forward pass: when it started, how long it took, the CUDA graph it replayed."""

    start_ms: float  # Unix time in milliseconds
    duration_ms: float
    cudagraph_size: int | None  # None: an eager step (no graph, no padding)
    prefills: Sequence[PrefillChunk]


@dataclass(frozen=True)
class Finished:
    """A finished request, as the engine's output processor sees it."""

    request_id: str
    prompt_tokens: int
    arrival_ms: float
    token_ms: Sequence[float]  # when each output token came (the first is the first token)


class StepMapper:
    """Steps and finished requests -> Helios records. Remembers each unfinished request's prefill
    graphs (at most `max_open` requests: the oldest are forgotten, so an engine that aborts
    requests without telling the mapper cannot grow it without bound)."""

    def __init__(self, chooser: str = "vllm", max_open: int = 100_000) -> None:
        self.chooser, self.max_open = chooser, max_open
        self._graphs: OrderedDict[str, list[int]] = OrderedDict()

    def launches(self, step: Step, policy: Policy) -> list[LaunchRecord]:
        records = []
        for chunk in step.prefills:
            graph = step.cudagraph_size or chunk.num_new_tokens
            start = chunk.num_computed_tokens
            records.append(
                LaunchRecord(
                    t_ms=step.start_ms,
                    request=chunk.request_id,
                    graph=graph,
                    start=start,
                    end=start + chunk.num_new_tokens,
                    padded=graph - chunk.num_new_tokens,
                    chooser=self.chooser,
                    ms=step.duration_ms,
                    policy=policy.policy,
                    version=policy.version,
                )
            )
            self._graphs.setdefault(chunk.request_id, []).append(graph)
            if len(self._graphs) > self.max_open:
                self._graphs.popitem(last=False)
        return records

    def finished(self, done: Finished, policy: Policy) -> RequestRecord:
        first, *rest = done.token_ms
        gaps = [later - earlier for earlier, later in zip(done.token_ms, rest)]
        return RequestRecord(
            t_ms=done.token_ms[-1],
            request=done.request_id,
            prompt_tokens=done.prompt_tokens,
            ttft_ms=first - done.arrival_ms,
            itl_ms=gaps,
            launches=self._graphs.pop(done.request_id, None) or [done.prompt_tokens],
            policy=policy.policy,
            version=policy.version,
        )


def main(argv: Sequence[str]) -> int:
    """A toy engine: one 3,000-token prompt in chunks of the 2,048 graph, ten output tokens."""
    if len(argv) != 4:
        print("usage: vllm_step.py BASE_URL RECIPE TOKEN ENGINE", file=sys.stderr)
        return 2
    base_url, recipe, token, engine = argv
    watcher = PolicyWatcher(base_url, recipe, token)
    policy = watcher.start()
    mapper = StepMapper()
    with TelemetryReporter(base_url, recipe, token, engine=engine) as reporter:
        now = time.time() * 1000
        chunks = [PrefillChunk("cmpl-example-1", 0, 2048), PrefillChunk("cmpl-example-1", 2048, 952)]
        for i, chunk in enumerate(chunks):
            for record in mapper.launches(Step(now + 30 * i, 28.0, 2048, [chunk]), policy):
                reporter.add(record)
        tokens = [now + 60 + 5 * k for k in range(10)]
        reporter.add(mapper.finished(Finished("cmpl-example-1", 3000, now, tokens), watcher.current or policy))
    watcher.stop()
    stats = reporter.stats
    print(f"posted {stats.posted_records} records in session {reporter.session}")
    if stats.posted_records == 0 or stats.refused_batches or stats.dropped_records:
        print(
            f"error: {stats.refused_batches} batches refused, {stats.dropped_records} records dropped "
            f"(is {engine!r} the engine the token was made for?)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)  # the reporter logs why the server refused a batch
    sys.exit(main(sys.argv[1:]))
