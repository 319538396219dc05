"""Telemetry records of what the engine launched and served, built from the scheduler's own view
(no network here: records go to `helios_client.TelemetryReporter.add`, which only queues).

One launch record per prefill chunk, one request record per finished request, each tagged with
the policy and version bound to the request when its prefill began (`planning.SoloPlanner`). Per
request the ledger keeps a few numbers and an `array` of token gaps: a token costs one float
stored in place, no object.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

Sink = Callable[[dict[str, Any]], object]


class _Open:
    """One request in flight."""

    __slots__ = ("arrival_s", "first_s", "itl", "last_s", "launches", "policy", "prompt_tokens", "version")

    def __init__(self, prompt_tokens: int, arrival_s: float) -> None:
        self.prompt_tokens, self.arrival_s = prompt_tokens, arrival_s
        self.first_s = self.last_s = 0.0
        self.itl = array("d")
        self.launches: list[int] = []
        self.policy: str | None = None
        self.version = 0


class Ledger:
    """Builds records and hands each to `sink` (the reporter's `add`). Times are Unix seconds."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._open: dict[str, _Open] = {}
        self.unattributed = 0  # records not made: no policy was known yet (the product unreachable)

    def arrived(self, request_id: str, prompt_tokens: int, arrival_s: float) -> None:
        self._open[request_id] = _Open(prompt_tokens, arrival_s)

    def launched(
        self,
        request_id: str,
        *,
        start: int,
        end: int,
        graph: int,
        chooser: str,
        binding: tuple[str, int] | None,
        t_s: float,
        ms: float,
    ) -> None:
        """One prefill chunk [start, end) that ran in a step of `ms` as `graph` (its padded size)."""
        state = self._open.get(request_id)
        if state is None:
            return
        if binding is None:
            self.unattributed += 1
            return
        state.policy, state.version = binding
        state.launches.append(graph)
        self._sink(
            {
                "type": "launch",
                "t_ms": t_s * 1000.0,
                "request": request_id,
                "graph": graph,
                "start": start,
                "end": end,
                "padded": graph - (end - start),
                "chooser": chooser,
                "ms": ms,
                "policy": state.policy,
                "version": state.version,
            }
        )

    def tokens(self, request_id: str, t_s: float) -> None:
        """The request produced output in the step that ended at `t_s` (one gap per step)."""
        state = self._open.get(request_id)
        if state is None:
            return
        if state.first_s == 0.0:
            state.first_s = t_s
        else:
            state.itl.append((t_s - state.last_s) * 1000.0)
        state.last_s = t_s

    def finished(self, request_id: str, t_s: float) -> None:
        """Its request record (nothing for a request aborted before its first token)."""
        state = self._open.pop(request_id, None)
        if state is None or state.first_s == 0.0:
            return
        if state.policy is None or not state.launches:
            self.unattributed += 1
            return
        self._sink(
            {
                "type": "request",
                "t_ms": t_s * 1000.0,
                "request": request_id,
                "prompt_tokens": state.prompt_tokens,
                "ttft_ms": max(0.0, (state.first_s - state.arrival_s) * 1000.0),
                "itl_ms": state.itl.tolist(),
                "launches": state.launches,
                "policy": state.policy,
                "version": state.version,
            }
        )

    def __len__(self) -> int:
        return len(self._open)
