"""The multi-lane scheduler: one launch per step over lanes that init, prefill, then decode.

The solo-prefill policies say what one request's chunks are; serving also has to decide, step by
step, whether the next launch prefills, decodes, or does both in a mixed shape, and must never let
a decoding lane starve. `docs/scheduler.md` states the rules this loop follows and the invariants
the tests check.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from .catalog import Catalog, Graph
from .errors import InvalidInput
from .execution import ExecutionModel, unpadded_ms
from .policies import CostPolicy, Launch, Policy, PrefillState, make_policy, totals_equal
from .request import Request, fit_context

PROGRESS_EVERY = 512  # launches between progress callbacks: a few tens of ms of loop time

INIT, PREFILL, DECODE, MIXED = "init", "prefill", "decode", "mixed"
LAUNCH_KINDS: tuple[str, ...] = (INIT, PREFILL, DECODE, MIXED)


@dataclass(frozen=True, slots=True)
class Arrival:
    """One request of traffic: when it arrives, its prompt, and how many tokens it generates."""

    id: int
    arrival_ms: float
    request: Request
    output_tokens: int


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """How the loop runs.

    `policy` chooses a solo prefill lane's chunks. `max_decode_wait` is the most launches a
    decoding lane may sit out between two of its tokens. `max_lanes` caps admitted requests (None:
    the rows of the largest decode graph, so one decode launch always carries every decoding lane).
    `trace_limit` keeps that many first launches in the result, for tests and dashboards.
    """

    policy: str = "rule"
    max_lanes: int | None = None
    max_decode_wait: int = 2
    trace_limit: int = 0


@dataclass(frozen=True, slots=True)
class StepLaunch:
    """One launch of the loop: its shape, which lanes rode in it, and when it ran on the true clock."""

    index: int
    kind: str
    prefill: int
    decode: int
    lane: int | None  # the request whose init or prefill row this launch carries
    chunk: Launch | None
    decode_lanes: tuple[int, ...]
    start_ms: float
    end_ms: float
    predicted_ms: float

    def to_dict(self) -> dict[str, Any]:
        c = self.chunk
        chunk = None if c is None else {"graph": c.graph, "start": c.start, "end": c.end, "chooser": c.chooser}
        every = {f.name: getattr(self, f.name) for f in fields(self)}
        return every | {"chunk": chunk, "decode_lanes": list(self.decode_lanes)}


@dataclass(frozen=True, slots=True)
class LaneOutcome:
    """A finished request: absolute times on the simulation clock and the prefill chunks it ran."""

    id: int
    arrival_ms: float
    first_token_at_ms: float
    finish_ms: float
    tokens: int
    chunks: tuple[Launch, ...]
    solo: tuple[bool, ...]  # per chunk: chosen while this was the only lane waiting to prefill
    max_itl_ms: float  # the longest gap between two of its tokens (0 with a single token)

    @property
    def ttft_ms(self) -> float:
        return self.first_token_at_ms - self.arrival_ms


@dataclass(frozen=True, slots=True)
class Stall:
    """A prefill lane left without a launch: reported instead of looping forever."""

    lane: int
    position: int
    policy: str


@dataclass(frozen=True, slots=True)
class LaunchReport:
    """What one launch did, handed to a `StepLoop`'s `on_launch` hook (a serving engine's telemetry)."""

    launch: StepLaunch
    gaps_ms: tuple[float, ...]  # per decoding lane it carried (`launch.decode_lanes`): time since its last token
    finished: tuple[LaneOutcome, ...]  # the requests whose last token it produced


@dataclass(frozen=True)
class ScheduleResult:
    """What a run produced. With a stall the run stops there and `lanes` holds those finished so far."""

    policy: str
    lanes: tuple[LaneOutcome, ...]
    launch_counts: dict[str, int]
    padded_prefill_tokens: int
    # GPU time spent on padding: each launch's true ms x its padded share of the tokens it carries
    padded_prefill_ms: float
    padded_decode_rows: int
    itl_ms: Sequence[float]  # every gap between two consecutive tokens of one lane (a compact array)
    end_ms: float
    stall: Stall | None
    trace: tuple[StepLaunch, ...]
    clipped: int = 0  # requests whose prompt was clipped to fit the model's context (`fit_context`)

    @property
    def launch_count(self) -> int:
        return sum(self.launch_counts.values())


class _Lane:
    """A request's mutable progress through init, prefill and decode."""

    __slots__ = (
        "arrival",
        "end",
        "phase",
        "position",
        "tokens",
        "chunks",
        "solo",
        "first_token_at",
        "last_index",
        "last_ms",
        "max_gap",
        "planner",
    )

    def __init__(self, arrival: Arrival) -> None:
        self.arrival = arrival
        self.end = arrival.request.plan_end  # also the keys it has cached once prefilled
        self.phase = INIT
        self.position = 0
        self.tokens = 0
        self.chunks: list[Launch] = []
        self.solo: list[bool] = []
        self.first_token_at = 0.0
        self.last_index = -1  # launch index of its latest token
        self.last_ms = 0.0
        self.max_gap = 0.0
        # The solo policy in force at its first chunk: it plans the rest
        # of the request, whatever `set_solo_policy` says meanwhile (one request, one planner).
        self.planner: Policy | None = None

    def outcome(self) -> LaneOutcome:
        a = self.arrival
        return LaneOutcome(
            a.id,
            a.arrival_ms,
            self.first_token_at,
            self.last_ms,
            self.tokens,
            tuple(self.chunks),
            tuple(self.solo),
            self.max_gap,
        )


class _Shapes:
    """Catalog lookups by rows needed: the smallest decode graph, or the mixed graph for a prefill row."""

    def __init__(self, catalog: Catalog, max_rows: int) -> None:
        decode = sorted(catalog.of_kind(DECODE), key=lambda g: g.decode)
        self._decode = [_smallest_covering(decode, k) for k in range(1, max_rows + 1)]
        by_prefill: dict[int, list[Graph]] = {}
        for g in sorted(catalog.of_kind(MIXED), key=lambda g: g.decode):
            by_prefill.setdefault(g.prefill, []).append(g)
        self._mixed = {c: [_smallest_covering(gs, k) for k in range(1, max_rows + 1)] for c, gs in by_prefill.items()}
        init = catalog.graph(0, 0)
        self.init_predicted_ms = 0.0 if init is None else _predicted(init)
        self.prefill_sizes = catalog.prefill_sizes()  # by decode rows

    def decode_for(self, rows: int) -> Graph:
        graph = self._decode[rows - 1]
        assert graph is not None, "max_lanes is capped at the largest decode graph's rows"
        return graph

    def mixed_for(self, prefill: int, rows: int) -> Graph | None:
        graphs = self._mixed.get(prefill)
        return None if graphs is None else graphs[rows - 1]


def _smallest_covering(graphs: list[Graph], rows: int) -> Graph | None:
    """The first graph, of those sorted by decode rows, with at least `rows` rows."""
    return next((g for g in graphs if g.decode >= rows), None)


def _predicted(graph: Graph) -> float:
    return 0.0 if graph.ms is None else graph.ms


def schedule(
    arrivals: Sequence[Arrival],
    catalog: Catalog,
    execution: ExecutionModel,
    config: SchedulerConfig = SchedulerConfig(),
    on_progress: Callable[[int, int], None] | None = None,
) -> ScheduleResult:
    """Run traffic through the step loop until every request finishes or a lane stalls.

    `on_progress(finished_requests, launch_count)` is called every `PROGRESS_EVERY` launches.
    """
    return StepLoop(arrivals, catalog, execution, config, on_progress).run()


def _validate(arrivals: Sequence[Arrival], catalog: Catalog, config: SchedulerConfig) -> int:
    """Reject input the loop could never finish; returns the lane cap."""
    decode_rows = [g.decode for g in catalog.of_kind(DECODE)]
    if not decode_rows:
        raise InvalidInput("catalog", "has no decode graph (prefill == 0, decode > 0): decoding lanes could never run")
    max_lanes = max(decode_rows) if config.max_lanes is None else config.max_lanes
    if not 1 <= max_lanes <= max(decode_rows):
        raise InvalidInput(
            "max_lanes", f"must be in [1, {max(decode_rows)}] (the largest decode graph's rows), got {max_lanes}"
        )
    if config.max_decode_wait < 1:
        raise InvalidInput(
            "max_decode_wait", f"must be >= 1 (0 would leave no launch for prefill), got {config.max_decode_wait}"
        )
    seen: set[int] = set()
    for i, a in enumerate(arrivals):
        f = f"arrivals[{i}]"
        if a.id in seen:
            raise InvalidInput(f"{f}.id", f"duplicate request id {a.id}")
        seen.add(a.id)
        if not math.isfinite(a.arrival_ms) or a.arrival_ms < 0:
            raise InvalidInput(f"{f}.arrival_ms", f"must be finite and >= 0, got {a.arrival_ms!r}")
        if a.output_tokens < 1:
            raise InvalidInput(f"{f}.output_tokens", f"must be >= 1, got {a.output_tokens}")
        if a.request.plan_end < 1:
            raise InvalidInput(f"{f}.request", "has nothing to prefill (its plan ends at 0): no first token")
        for start, end in a.request.atomic_spans:
            if end - start > catalog.full_chunk:
                raise InvalidInput(
                    f"{f}.request.atomic_spans",
                    f"span [{start}, {end}) is longer than the full chunk {catalog.full_chunk}",
                )
    return max_lanes


class StepLoop:
    """One run's state: the clock, the queue of arrivals, and the lanes in FCFS prefill and decode order.

    `run` takes a finite list of arrivals to the end (`schedule`). A serving engine
    (`scheduler_core.engine`) drives the same loop in slices instead: `arrive` as traffic comes,
    `run_until` the clock passes a time, `set_solo_policy` between two launches, `forget` what it
    no longer needs, and `on_launch` hears of every launch.

    Every launch is costed with its context: a prefill row after the tokens its lane has cached, the
    decode rows with `context`, the keys they attend in all (each lane's prompt and tokens so far).
    A request longer than the model's context has its prompt clipped on arrival (`clipped` counts them).
    """

    def __init__(
        self,
        arrivals: Sequence[Arrival],
        catalog: Catalog,
        execution: ExecutionModel,
        config: SchedulerConfig,
        on_progress: Callable[[int, int], None] | None = None,
        on_launch: Callable[[LaunchReport], None] | None = None,
    ) -> None:
        self.on_launch = on_launch
        self.solo_policy = make_policy(config.policy)
        self.max_lanes = _validate(arrivals, catalog, config)
        self.catalog, self.execution, self.config, self.on_progress = catalog, execution, config, on_progress
        self.max_context = execution.max_context
        self.clipped = 0
        self.shapes = _Shapes(catalog, self.max_lanes)
        # `cost` plans solo chunks and busy ones alike: one instance, so its plan table is filled once
        self.busy_policy = self.solo_policy if isinstance(self.solo_policy, CostPolicy) else CostPolicy()
        self.pending = sorted((self._fit(a) for a in arrivals), key=lambda a: (a.arrival_ms, a.id))
        self.next_arrival = 0
        self.prefilling: deque[_Lane] = deque()  # init or prefill phase, first come first served
        self.decoding: list[_Lane] = []  # ascending by last token's launch index
        self.context = 0  # keys the decoding lanes attend in all: each its prompt and its tokens so far
        self.finished: list[LaneOutcome] = []
        self.clock = 0.0
        self.index = 0
        self.counts = dict.fromkeys(LAUNCH_KINDS, 0)
        self.padded_prefill = 0
        self.padded_prefill_ms = 0.0
        self.padded_decode = 0
        self.gaps = array("d")  # one float per output token: keep it compact
        self.trace: list[StepLaunch] = []

    def run(self) -> ScheduleResult:
        pending = self.pending
        while True:
            self._admit()
            if not self.prefilling and not self.decoding:
                if self.next_arrival == len(pending):
                    return self._result(None)
                self.clock = max(self.clock, pending[self.next_arrival].arrival_ms)
                continue
            if not self.prefilling and self.index >= self.config.trace_limit and self.on_launch is None:
                self._decode_stretch()
                continue
            stall = self._step()
            if stall is not None:
                return self._result(stall)
            self._report()

    def _report(self) -> None:
        if self.on_progress is not None and self.index % PROGRESS_EVERY == 0:
            self.on_progress(len(self.finished), self.index)

    def _decode_stretch(self) -> None:
        """Decode launches while no lane waits to prefill, until an arrival can be admitted or every
        lane has finished: three launches in four on the Azure trace. It makes exactly the launches
        `_step` would, with the same float arithmetic in the same order, in far fewer operations: after
        the stretch's first launch every decoding lane's last token is at the same instant, so
        each later launch's gap is one subtraction shared by all of them, and the lanes are
        touched only when one finishes. Launches kept in `trace`, or heard by `on_launch`, go through
        `_step` instead."""
        self._launch_decode()
        self._report()
        while self.decoding and not self._admissible():
            self._uniform_launches()

    def _admissible(self) -> bool:
        """The next arrival has come and a lane is free for it (what `_admit` would take)."""
        nxt = self.next_arrival
        return (
            nxt < len(self.pending)
            and self.pending[nxt].arrival_ms <= self.clock
            and len(self.prefilling) + len(self.decoding) < self.max_lanes
        )

    def _uniform_launches(self) -> None:
        """Decode launches over lanes whose last tokens all came at `clock`, the same graph for each,
        until the first of them finishes or an arrival can be admitted."""
        decoding, pending, gaps, on_progress = self.decoding, self.pending, self.gaps, self.on_progress
        n = len(decoding)
        graph = self.shapes.decode_for(n)
        execution, context = self.execution, self.context
        # with a model that follows context each launch's rows attend n keys more than the last one's
        follows = execution.follows_context
        ms = execution.launch_ms(0, graph.decode, 0, context)
        left = min(lane.arrival.output_tokens - lane.tokens for lane in decoding)  # launches until one finishes
        nxt = self.next_arrival
        admit_at = pending[nxt].arrival_ms if nxt < len(pending) and n < self.max_lanes else math.inf
        clock, index, longest, made = self.clock, self.index, 0.0, 0
        while made < left:
            if follows:
                ms = execution.launch_ms(0, graph.decode, 0, context + made * n)
            end = clock + ms
            gap = end - clock  # each lane's `end - last_ms`: the same float for all of them
            gaps.fromlist([gap] * n)
            if gap > longest:
                longest = gap
            clock, index, made = end, index + 1, made + 1
            if on_progress is not None and index % PROGRESS_EVERY == 0 and made < left:
                on_progress(len(self.finished), index)  # no lane finishes before the last of these launches
            if admit_at <= clock:
                break
        context += made * n
        still = []
        for lane in decoding:
            lane.tokens += made
            lane.last_index, lane.last_ms = index - 1, clock
            if longest > lane.max_gap:
                lane.max_gap = longest
            if lane.tokens >= lane.arrival.output_tokens:
                self.finished.append(lane.outcome())
                context -= lane.end + lane.tokens
            else:
                still.append(lane)
        self.context = context
        self.decoding, self.clock, self.index = still, clock, index
        self.counts[DECODE] += made
        self.padded_decode += made * (graph.decode - n)
        if made == left:
            self._report()  # the launch that finished a lane, counted with it

    def run_until(self, until_ms: float) -> Stall | None:
        """Launch until the clock passes `until_ms` (a launch in flight then finishes: launches are
        not preemptible), or, idle, move the clock to `until_ms`; a stall stops it and is returned."""
        pending = self.pending
        while True:
            self._admit()
            if not self.prefilling and not self.decoding:
                if self.next_arrival == len(pending):
                    self.clock = max(self.clock, until_ms)  # idle: nothing has arrived yet
                    return None
                self.clock = max(self.clock, pending[self.next_arrival].arrival_ms)
                continue
            if self.clock >= until_ms:
                return None
            stall = self._step()
            if stall is not None:
                return stall

    def arrive(self, arrival: Arrival) -> None:
        """One more arrival, no earlier than the last one given."""
        self.pending.append(self._fit(arrival))

    def _fit(self, arrival: Arrival) -> Arrival:
        """The arrival with its prompt clipped to the model's context, counted when it was."""
        if self.max_context is None:
            return arrival
        request, output = fit_context(arrival.request, arrival.output_tokens, self.max_context)
        if request is arrival.request and output == arrival.output_tokens:
            return arrival
        self.clipped += 1
        return Arrival(arrival.id, arrival.arrival_ms, request, output)

    def set_solo_policy(self, name: str) -> None:
        """Choose solo prefill chunks with `name` for requests whose first chunk is still to come
        (one already prefilling keeps the policy that planned its first chunk; the busy path stays cost)."""
        self.solo_policy = make_policy(name)

    def forget(self, admitted_every: int) -> None:
        """Drop finished outcomes, the run-wide gap list and, once `admitted_every` arrivals are
        admitted, those arrivals: a loop that runs for days keeps its memory flat."""
        if self.next_arrival >= admitted_every:
            del self.pending[: self.next_arrival]
            self.next_arrival = 0
        self.finished.clear()
        del self.gaps[:]

    def _admit(self) -> None:
        pending, clock = self.pending, self.clock
        while (
            self.next_arrival < len(pending)
            and pending[self.next_arrival].arrival_ms <= clock
            and len(self.prefilling) + len(self.decoding) < self.max_lanes
        ):
            self.prefilling.append(_Lane(pending[self.next_arrival]))
            self.next_arrival += 1

    def _step(self) -> Stall | None:
        """Choose and make one launch; a prefill lane with no chunk left is a stall."""
        decoding = self.decoding
        # Launches the longest-waiting decoding lane has sat out; one more would break the bound.
        must_decode = bool(decoding) and self.index - 1 - decoding[0].last_index >= self.config.max_decode_wait
        if not self.prefilling:
            self._launch_decode()
            return None
        head = self.prefilling[0]
        if head.phase == INIT:
            if must_decode:
                self._launch_decode()
            else:
                self._launch(INIT, 0, 0, self.shapes.init_predicted_ms, head)
            return None
        solo = len(self.prefilling) == 1
        policy = (head.planner or self.solo_policy) if solo else self.busy_policy
        state = PrefillState(self.catalog, head.arrival.request, head.position)
        chunk = policy.choose(state)
        if chunk is None or chunk.end <= head.position:
            return Stall(head.arrival.id, head.position, policy.name)
        # what the engine runs: the chosen graph, or on one that pads nothing the chunk's own tokens
        ran = chunk if self.catalog.pads else replace(chunk, graph=chunk.end - chunk.start)
        if not decoding:
            self._launch(PREFILL, ran.graph, 0, chunk.predicted_ms, head, ran, solo)
            return None
        decode = self.shapes.decode_for(len(decoding))
        mixed = (
            self.shapes.mixed_for(chunk.graph, len(decoding))
            if not solo or policy.may_ride_mixed(chunk, state)
            else None
        )
        if mixed is not None and _not_dearer(_predicted(mixed), chunk.predicted_ms + _predicted(decode)):
            self._launch(MIXED, ran.graph, mixed.decode, _predicted(mixed), head, ran, solo)
        elif must_decode:
            self._launch_decode()
        else:
            self._launch(PREFILL, ran.graph, 0, chunk.predicted_ms, head, ran, solo)
        return None

    def _launch_decode(self) -> None:
        graph = self.shapes.decode_for(len(self.decoding))
        self._launch(DECODE, 0, graph.decode, _predicted(graph))

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
        """Advance the clock by the launch's true cost and every lane that rode in it."""
        index, start = self.index, self.clock
        hook = self.on_launch
        finished_before, gaps_before = len(self.finished), len(self.gaps)
        cached, context = 0 if lane is None else lane.position, self.context if decode else None
        if self.catalog.pads:
            ms = self.execution.launch_ms(prefill, decode, cached, context)
        else:
            ms = unpadded_ms(
                self.execution, self.shapes.prefill_sizes.get(decode, ()), prefill, decode, cached, context
            )
        end = start + ms
        completes = chunk is not None and lane is not None and chunk.end >= lane.end
        if completes:
            end += self.execution.first_token_ms  # sampling the first token is part of the last chunk's launch
        carried: tuple[int, ...] = ()
        if decode:
            carried = self._decode_tokens(index, end)
            self.padded_decode += decode - len(carried)
        if lane is not None:
            if kind == INIT:
                lane.phase = PREFILL
            else:
                assert chunk is not None
                if lane.planner is None:
                    lane.planner = self.solo_policy
                lane.chunks.append(chunk)
                lane.solo.append(solo)
                lane.position = chunk.end
                self.padded_prefill += chunk.padding
                if chunk.padding:
                    self.padded_prefill_ms += ms * chunk.padding / (prefill + decode)
                if completes:
                    self._first_token(lane, index, end)
        self.counts[kind] += 1
        traced = index < self.config.trace_limit
        if traced or hook is not None:
            rider = None if lane is None else lane.arrival.id
            step = StepLaunch(index, kind, prefill, decode, rider, chunk, carried, start, end, predicted_ms)
            if traced:
                self.trace.append(step)
            if hook is not None:
                hook(LaunchReport(step, tuple(self.gaps[gaps_before:]), tuple(self.finished[finished_before:])))
        self.index = index + 1
        self.clock = end

    def _decode_tokens(self, index: int, end: float) -> tuple[int, ...]:
        """Every decoding lane rides in a decode-carrying launch and gets one token (one key more)."""
        carried = tuple(lane.arrival.id for lane in self.decoding)
        self.context += len(carried)
        gaps, still = self.gaps, []
        for lane in self.decoding:
            gap = end - lane.last_ms
            gaps.append(gap)
            if gap > lane.max_gap:
                lane.max_gap = gap
            lane.tokens += 1
            lane.last_index, lane.last_ms = index, end
            if lane.tokens >= lane.arrival.output_tokens:
                self.finished.append(lane.outcome())
                self.context -= lane.end + lane.tokens
            else:
                still.append(lane)
        self.decoding = still
        return carried

    def _first_token(self, lane: _Lane, index: int, end: float) -> None:
        self.prefilling.popleft()
        lane.phase = DECODE
        lane.tokens = 1
        lane.first_token_at = lane.last_ms = end
        lane.last_index = index
        if lane.tokens >= lane.arrival.output_tokens:
            self.finished.append(lane.outcome())
        else:
            self.decoding.append(lane)
            self.context += lane.end + lane.tokens

    def _result(self, stall: Stall | None) -> ScheduleResult:
        return ScheduleResult(
            self.config.policy,
            tuple(sorted(self.finished, key=lambda o: o.id)),
            dict(self.counts),
            self.padded_prefill,
            self.padded_prefill_ms,
            self.padded_decode,
            self.gaps,
            self.clock,
            stall,
            tuple(self.trace),
            self.clipped,
        )


def _not_dearer(a: float, b: float) -> bool:
    """a <= b within the spec's relative tolerance."""
    return a < b or totals_equal(a, b)
