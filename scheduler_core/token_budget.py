"""A token-budget step loop: how vLLM's v1 scheduler batches, for checking the simulator against it.

`scheduler.StepLoop` runs one prefill lane per launch beside the decoding ones, as the spec's
engine does. vLLM fills each step to a budget of tokens (`max_num_batched_tokens`) instead:
first every running request in the order it was admitted (one token for a decoding one, the next
chunk of its prompt for a prefilling one, as much as the budget has left), then the waiting
requests, first come first served, each from what is left, until the budget or the lanes run out.
Two prompts that arrive together are prefilled in one step. The helios-vllm plugin narrows the
budget only where one request is alone in the engine and prefilling, to the chunk its policy plans
(the policy in force at its first chunk); this loop does the same, with the same policies.

A step is costed as one launch of all its prefill tokens beside its decode rows (the rows padded
to the table's next decode graph, the tokens to the next prefill graph where the catalog pads),
attending the cached keys of each request it prefills: attention's term is linear, so a step of
several chunks attends as one chunk of their tokens at their token-weighted position.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .catalog import Catalog
from .errors import InvalidInput
from .execution import ExecutionModel, unpadded_ms
from .policies import Launch, Policy, PrefillState, make_policy
from .request import fit_context
from .scheduler import DECODE, MIXED, Arrival

BUDGET_CHOOSER = "budget"  # a chunk cut by the step's budget, no policy consulted


@dataclass(frozen=True, slots=True)
class BudgetOutcome:
    """A finished request: when it arrived, its first token, and the prefill chunks it ran."""

    id: int
    arrival_ms: float
    first_token_at_ms: float
    chunks: tuple[Launch, ...]

    @property
    def ttft_ms(self) -> float:
        return self.first_token_at_ms - self.arrival_ms


class _Lane:
    __slots__ = ("arrival", "prompt", "position", "tokens", "chunks", "first_token_at", "planner")

    def __init__(self, arrival: Arrival, max_context: int | None) -> None:
        if max_context is not None:  # a prompt clipped to the model's context, as `StepLoop` does
            request, output = fit_context(arrival.request, arrival.output_tokens, max_context)
            arrival = replace(arrival, request=request, output_tokens=output)
        self.arrival = arrival
        self.prompt = arrival.request.plan_end
        self.position = 0
        self.tokens = 0
        self.chunks: list[Launch] = []
        self.first_token_at = 0.0
        self.planner: Policy | None = None  # the solo policy in force at its first chunk

    def prefilled(self, chunk: Launch, solo_policy: Policy, end_ms: float) -> None:
        """`chunk` ran; the prompt's last chunk samples the first token, at the step's end."""
        if self.planner is None:
            self.planner = solo_policy
        self.chunks.append(chunk)
        self.position = chunk.end
        if self.position >= self.prompt:
            self.tokens, self.first_token_at = 1, end_ms

    def outcome(self) -> BudgetOutcome:
        a = self.arrival
        return BudgetOutcome(a.id, a.arrival_ms, self.first_token_at, tuple(self.chunks))


def schedule_budget(
    arrivals: list[Arrival],
    catalog: Catalog,
    execution: ExecutionModel,
    policy: str,
    budget: int,
    max_lanes: int,
) -> list[BudgetOutcome]:
    """Every request served to its last token, each step filling `budget` tokens over at most
    `max_lanes` running requests; a lone prefilling request's chunk as `policy` plans it."""
    if budget < 1:
        raise InvalidInput("budget", f"must be >= 1 token, got {budget}")
    for i, a in enumerate(arrivals):
        if a.request.plan_end < 1 or a.output_tokens < 1:
            raise InvalidInput(f"arrivals[{i}]", "needs a prompt to prefill and at least one output token")
    shapes = _StepShapes(catalog, max_lanes)
    solo_policy = make_policy(policy)
    pending = sorted(arrivals, key=lambda a: (a.arrival_ms, a.id))
    waiting: deque[_Lane] = deque()
    running: list[_Lane] = []
    done: list[BudgetOutcome] = []
    clock, admitted = 0.0, 0
    while admitted < len(pending) or waiting or running:
        while admitted < len(pending) and pending[admitted].arrival_ms <= clock:
            waiting.append(_Lane(pending[admitted], execution.max_context))
            admitted += 1
        if not waiting and not running:
            clock = pending[admitted].arrival_ms
            continue
        solo = _solo_chunk(running, waiting, catalog, solo_policy)
        left = budget if solo is None else solo.end - solo.start
        rows: list[tuple[_Lane, int]] = []
        for lane in running:
            take = min(1 if lane.position >= lane.prompt else lane.prompt - lane.position, left)
            if take:
                rows.append((lane, take))
                left -= take
        while waiting and left and len(running) < max_lanes:
            lane = waiting.popleft()
            running.append(lane)
            rows.append((lane, min(lane.prompt, left)))
            left -= rows[-1][1]
        clock += shapes.step_ms(execution, rows)
        if any(lane.position + take >= lane.prompt > lane.position for lane, take in rows):
            clock += execution.first_token_ms  # sampling a first token is part of its last chunk's step
        for lane, take in rows:
            if lane.position < lane.prompt:
                lane.prefilled(solo or _budget_chunk(catalog, lane.position, take), solo_policy, clock)
            else:
                lane.tokens += 1
        done += [lane.outcome() for lane in running if lane.tokens >= lane.arrival.output_tokens]
        running = [lane for lane in running if lane.tokens < lane.arrival.output_tokens]
    return sorted(done, key=lambda o: o.id)


def _solo_chunk(running: list[_Lane], waiting: deque[_Lane], catalog: Catalog, solo_policy: Policy) -> Launch | None:
    """A lone prefilling request's next chunk as its policy plans it (the plugin's `solo_chunk`),
    or None: other requests in the engine, or the policy has no chunk to give (vLLM then cuts it)."""
    if len(running) + len(waiting) != 1:
        return None
    lane = running[0] if running else waiting[0]
    if lane.position >= lane.prompt:
        return None
    launch = (lane.planner or solo_policy).choose(PrefillState(catalog, lane.arrival.request, lane.position))
    if launch is None or launch.end <= lane.position:
        return None
    return launch if catalog.pads else replace(launch, graph=launch.end - launch.start)


def _budget_chunk(catalog: Catalog, position: int, tokens: int) -> Launch:
    """A chunk the step's budget cut: the graph covering it where the catalog pads, else its size."""
    graph = _covering(catalog.capacities, tokens) if catalog.pads else tokens
    return Launch(graph, position, position + tokens, BUDGET_CHOOSER, 0.0)


def _covering(sizes: Sequence[int], tokens: int) -> int:
    """The smallest of ascending `sizes` holding `tokens` (the largest where none does)."""
    return next((s for s in sizes if s >= tokens), sizes[-1])


class _StepShapes:
    """The graphs a step's rows run in: decode rows padded to the next decode (or mixed) graph."""

    def __init__(self, catalog: Catalog, max_lanes: int) -> None:
        self.pads = catalog.pads
        self.rows: dict[str, list[int]] = {
            kind: sorted({g.decode for g in catalog.of_kind(kind)}) for kind in (DECODE, MIXED)
        }
        self.sizes = catalog.prefill_sizes()  # by decode rows
        for kind, rows in self.rows.items():
            if not rows or rows[-1] < max_lanes:
                raise InvalidInput(
                    "max_lanes", f"is {max_lanes}, more than the rows of the catalog's largest {kind} graph"
                )

    def step_ms(self, execution: ExecutionModel, rows: list[tuple[_Lane, int]]) -> float:
        prefill = [(lane.position, take) for lane, take in rows if lane.position < lane.prompt]
        decoding = [lane for lane, _ in rows if lane.position >= lane.prompt]
        tokens = sum(take for _, take in prefill)
        context = sum(lane.prompt + lane.tokens for lane in decoding) if decoding else None
        decode = _covering(self.rows[MIXED if tokens else DECODE], len(decoding)) if decoding else 0
        if not tokens:
            return execution.launch_ms(0, decode, 0, context)
        cached = round(sum(position * take for position, take in prefill) / tokens)
        sizes = self.sizes[decode]
        if self.pads:
            return execution.launch_ms(_covering(sizes, tokens), decode, cached, context)
        return unpadded_ms(execution, sizes, tokens, decode, cached, context)
