"""The multi-lane loop run as a serving engine: traffic that never ends, a policy that can change
while it serves, and what a real engine would report about each launch and each request.

An engine advances its clock a little at a time (`advance(until_ms)`), takes arrivals as they come,
and swaps its solo policy when told (`set_policy`). A request already prefilling keeps the version
that planned its first chunk to its end, so its launch sequence is one version's and the
per-version counts never mix two policies. The records it returns are the telemetry a web service
stores (one per prefill launch, one per finished request), each tagged with the policy and version
that planned its chunks, on the engine's own clock (ms from its start). `load()` judges whether it
keeps up (`saturation`) over its last `LOAD_REQUESTS` arrivals.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import saturation
from .catalog import Catalog
from .errors import InvalidInput
from .execution import ExecutionModel
from .scheduler import Arrival, LaunchReport, SchedulerConfig, StepLoop
from .traffic import TrafficShape, poisson_arrivals

_TRIM_EVERY = 1024  # admitted arrivals between trims of the pending list (keeps memory flat)
LOAD_REQUESTS = 10_000  # the latest arrivals the load is judged over (bounded: an engine runs for days)


class EngineLoop:
    """The step loop of `scheduler.py` (a `StepLoop`, driven through its public hooks), advanced in
    slices, its solo policy swappable between launches.

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
        self._loop = StepLoop([], catalog, execution, config, on_launch=self._record)
        self.version = 0
        # Poisson draws, or any endless stream in time order (a trace replayed: `traffic.looped`)
        self._arrivals = poisson_arrivals(traffic, catalog.full_chunk) if isinstance(traffic, TrafficShape) else traffic
        self._next: Arrival = next(self._arrivals)
        self._records: list[dict[str, Any]] = []
        self._itl: dict[int, list[float]] = {}
        self._prefills: dict[int, list[int]] = {}  # per request: its prefill graphs, in order
        self._prompts: dict[int, int] = {}
        self._planners: dict[int, tuple[str, int]] = {}  # per request in flight: the policy and version planning it
        self._arrived: dict[int, float] = {}  # the latest LOAD_REQUESTS arrivals, oldest first
        self._first_token: dict[int, float] = {}  # ... and when those that got one got their first token

    def set_policy(self, name: str, version: int) -> None:
        """Use `name` for the solo prefill decisions of requests not yet prefilling (one already
        prefilling keeps the version that planned its first chunk; the busy path stays cost)."""
        self._loop.set_solo_policy(name)
        self.version = version

    @property
    def policy(self) -> str:
        return self._loop.solo_policy.name

    def advance(self, until_ms: float) -> list[dict[str, Any]]:
        """Run up to `until_ms` on the engine clock; the launch and request records since the last call."""
        while self._next.arrival_ms <= until_ms:
            self._loop.arrive(self._next)
            self._prompts[self._next.id] = self._next.request.prompt_tokens
            self._arrived[self._next.id] = self._next.arrival_ms
            if len(self._arrived) > LOAD_REQUESTS:
                oldest = next(iter(self._arrived))
                del self._arrived[oldest]
                self._first_token.pop(oldest, None)
            self._next = next(self._arrivals)
        stall = self._loop.run_until(until_ms)
        if stall is not None:
            raise InvalidInput("policy", f"{stall.policy} stalled request {stall.lane} at position {stall.position}")
        self._loop.forget(_TRIM_EVERY)  # finished outcomes, admitted arrivals: an engine runs for days
        records, self._records = self._records, []
        return records

    def load(self) -> saturation.Load:
        """Whether the engine keeps up with its traffic, over its latest LOAD_REQUESTS arrivals (a
        request's first token taken at the end of its last prefill chunk)."""
        return saturation.judge(list(self._arrived.values()), self._first_token.values())

    def _record(self, report: LaunchReport) -> None:
        """A launch's record (a prefill chunk's) and one per request it finished, each tagged with
        the version that planned the request's first chunk (`StepLoop` plans the rest with it)."""
        launch = report.launch
        for request, gap in zip(launch.decode_lanes, report.gaps_ms):
            self._itl.setdefault(request, []).append(gap)
        chunk = launch.chunk
        if chunk is not None and launch.lane is not None:
            policy, version = self._planners.setdefault(launch.lane, (self.policy, self.version))
            self._prefills.setdefault(launch.lane, []).append(chunk.graph)
            if chunk.end == self._prompts[launch.lane] and launch.lane in self._arrived:
                self._first_token[launch.lane] = launch.end_ms  # its prompt is in: the first token
            self._records.append(
                {
                    "type": "launch",
                    "t_ms": launch.start_ms,
                    "request": launch.lane,
                    "graph": chunk.graph,
                    "start": chunk.start,
                    "end": chunk.end,
                    "padded": chunk.padding,
                    "chooser": chunk.chooser,
                    "ms": launch.end_ms - launch.start_ms,
                    "policy": policy,
                    "version": version,
                }
            )
        for outcome in report.finished:
            policy, version = self._planners.pop(outcome.id)
            self._records.append(
                {
                    "type": "request",
                    "t_ms": outcome.finish_ms,
                    "request": outcome.id,
                    "prompt_tokens": self._prompts.pop(outcome.id),
                    "ttft_ms": outcome.ttft_ms,
                    "itl_ms": self._itl.pop(outcome.id, []),
                    "launches": self._prefills.pop(outcome.id, []),
                    "policy": policy,
                    "version": version,
                }
            )
