"""The multi-lane loop run as a serving engine: traffic that never ends, a policy that can change
while it serves, and what a real engine would report about each launch and each request.

`scheduler.schedule` runs a finite list of arrivals to the end; an engine instead advances its
clock a little at a time (`advance(until_ms)`), takes arrivals as they come, and swaps its solo
policy when told (`set_policy`), in force for every request whose first prefill chunk comes
after it: a request already prefilling keeps the version that planned its first chunk to its
end, so its launch sequence is one version's and the per-version counts (launches per request,
sequences per prompt length) never mix two policies. The records it returns are the telemetry a
web service stores: one per prefill launch, one per finished request, each tagged with the policy
and version that planned its chunks (for a request, not the version in force when it finished). Times are on the engine's own clock (ms from
its start); the caller maps them to the wall clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .catalog import Catalog
from .errors import InvalidInput
from .execution import ExecutionModel
from .policies import Launch, Policy, RulePolicy, RuleV1Policy, make_policy
from .scheduler import Arrival, SchedulerConfig, Stall, _Lane, _Run
from .traffic import TrafficShape, poisson_arrivals

_TRIM_EVERY = 1024  # admitted arrivals between trims of the pending list (keeps memory flat)


@dataclass(frozen=True)
class _Planner:
    """A solo policy with the version that set it: what plans a request from its first chunk on."""

    policy: Policy
    version: int

    @property
    def rule_solo(self) -> bool:
        return isinstance(self.policy, (RulePolicy, RuleV1Policy))


class EngineLoop(_Run):
    """The step loop of `scheduler.py`, advanced in slices, its solo policy swappable between launches.

    `advance(until_ms)` runs launches until the clock passes `until_ms` (a launch in flight at
    that moment finishes: launches are not preemptible) and returns the records produced.
    """

    def __init__(
        self,
        catalog: Catalog,
        execution: ExecutionModel,
        config: SchedulerConfig,
        traffic: TrafficShape | Iterator[Arrival],
    ) -> None:
        super().__init__([], catalog, execution, config, None)
        self.version = 0
        # Poisson draws, or any endless stream in time order (a trace replayed: `traffic.looped`)
        self._arrivals = poisson_arrivals(traffic, catalog.full_chunk) if isinstance(traffic, TrafficShape) else traffic
        self._next: Arrival = next(self._arrivals)
        self._records: list[dict[str, Any]] = []
        self._itl: dict[int, list[float]] = {}
        self._prefills: dict[int, list[int]] = {}  # per request: its prefill graphs, in order
        self._prompts: dict[int, int] = {}
        self._planners: dict[int, _Planner] = {}  # per request in flight: the version planning its chunks

    def set_policy(self, name: str, version: int) -> None:
        """Use `name` for the solo prefill decisions of requests not yet prefilling (the busy path stays cost)."""
        self._use(_Planner(make_policy(name), version))

    def _use(self, planner: _Planner) -> None:
        self.solo_policy, self.rule_solo, self.version = planner.policy, planner.rule_solo, planner.version

    @property
    def policy(self) -> str:
        return self.solo_policy.name

    def advance(self, until_ms: float) -> list[dict[str, Any]]:
        """Run up to `until_ms` on the engine clock; the launch and request records since the last call."""
        self._take_arrivals(until_ms)
        while True:
            self._admit()
            if not self.prefilling and not self.decoding:
                if self.next_arrival == len(self.pending):
                    self.clock = max(self.clock, until_ms)  # idle: nothing has arrived yet
                    break
                self.clock = max(self.clock, self.pending[self.next_arrival].arrival_ms)
                continue
            if self.clock >= until_ms:
                break
            stall = self._step()
            if stall is not None:
                raise InvalidInput(
                    "policy", f"{stall.policy} stalled request {stall.lane} at position {stall.position}"
                )
        self._trim()
        records, self._records = self._records, []
        return records

    def _step(self) -> Stall | None:
        """One launch, the head request planned by the version that planned its first chunk."""
        pinned = self._planners.get(self.prefilling[0].arrival.id) if self.prefilling else None
        if pinned is None or pinned.version == self.version:
            return super()._step()
        current = _Planner(self.solo_policy, self.version)
        self._use(pinned)
        try:
            return super()._step()
        finally:
            self._use(current)

    def _take_arrivals(self, until_ms: float) -> None:
        while self._next.arrival_ms <= until_ms:
            self.pending.append(self._next)
            self._next = next(self._arrivals)

    def _trim(self) -> None:
        """Forget admitted arrivals, finished outcomes and the run-wide gap list: an engine runs for days."""
        if self.next_arrival >= _TRIM_EVERY:
            del self.pending[: self.next_arrival]
            self.next_arrival = 0
        self.finished.clear()
        del self.gaps[:]

    def _launch(
        self,
        kind: str,
        prefill: int,
        decode: int,
        predicted_ms: float,
        lane: _Lane | None = None,
        chunk: Launch | None = None,
        solo: bool = False,
    ) -> None:
        start = self.clock
        before = len(self.finished)
        super()._launch(kind, prefill, decode, predicted_ms, lane, chunk, solo)
        if chunk is not None and lane is not None:
            request = lane.arrival.id
            planner = self._planners.setdefault(request, _Planner(self.solo_policy, self.version))
            self._prefills.setdefault(request, []).append(chunk.graph)
            self._records.append(
                {
                    "type": "launch",
                    "t_ms": start,
                    "request": request,
                    "graph": chunk.graph,
                    "start": chunk.start,
                    "end": chunk.end,
                    "padded": chunk.padding,
                    "chooser": chunk.chooser,
                    "ms": self.clock - start,
                    "policy": planner.policy.name,
                    "version": planner.version,
                }
            )
        for outcome in self.finished[before:]:
            planner = self._planners.pop(outcome.id)
            self._records.append(
                {
                    "type": "request",
                    "t_ms": outcome.finish_ms,
                    "request": outcome.id,
                    "prompt_tokens": self._prompts.pop(outcome.id),
                    "ttft_ms": outcome.ttft_ms,
                    "itl_ms": self._itl.pop(outcome.id, []),
                    "launches": self._prefills.pop(outcome.id, []),
                    "policy": planner.policy.name,
                    "version": planner.version,
                }
            )

    def _admit(self) -> None:
        before = self.next_arrival
        super()._admit()
        for arrival in self.pending[before : self.next_arrival]:
            self._prompts[arrival.id] = arrival.request.prompt_tokens

    def _decode_tokens(self, index: int, end: float) -> tuple[int, ...]:
        for lane in self.decoding:
            self._itl.setdefault(lane.arrival.id, []).append(end - lane.last_ms)
        return super()._decode_tokens(index, end)
