"""Solo prefill chunks, planned by `scheduler_core` (never a copy of it).

A request is bound to the policy in force when its prefill begins (its first chunk, solo or not)
and keeps it to its end, as `scheduler_core.engine.EngineLoop` does: a decision applied while it
prefills changes the next request, not this one. Each solo step asks the bound policy for the
chunk at the request's position (`Policy.choose`), so the chunk sequence of a solo prefill is
`scheduler_core.planner.plan`'s, launch by launch.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler_core.catalog import Catalog
from scheduler_core.policies import Launch, Policy, PrefillState, make_policy
from scheduler_core.request import Request


@dataclass(frozen=True, slots=True)
class Binding:
    """The policy (and version) that plans one request, and the request as `scheduler_core` sees it."""

    policy: Policy
    name: str
    version: int
    request: Request


class SoloPlanner:
    """The recipe's active policy (set from the policy watcher's thread, read by the scheduler's:
    one tuple assigned whole) and the binding of each request in flight."""

    def __init__(self) -> None:
        self.catalog: Catalog | None = None  # the engine's own measurements, once taken
        self._active: tuple[str, int, Policy] | None = None
        self._bound: dict[str, Binding] = {}

    def set_policy(self, name: str, version: int) -> None:
        """The policy for prefills that begin from now on (a fresh object: policies cache tables)."""
        self._active = (name, version, make_policy(name))

    @property
    def active(self) -> tuple[str, int] | None:
        active = self._active
        return None if active is None else (active[0], active[1])

    def bind(self, request_id: str, prompt_tokens: int) -> Binding | None:
        """The request's binding, made now if its prefill is beginning; None before any policy is known."""
        binding = self._bound.get(request_id)
        if binding is None:
            active = self._active
            if active is None:
                return None
            binding = Binding(active[2], active[0], active[1], Request(prompt_tokens))
            self._bound[request_id] = binding
        return binding

    def solo_chunk(self, request_id: str, prompt_tokens: int, position: int) -> Launch | None:
        """The launch the request's policy plans at `position`, when it prefills alone; None
        without a catalog or a policy (vLLM then chooses), or when the policy offers none."""
        if self.catalog is None:
            return None
        binding = self.bind(request_id, prompt_tokens)
        if binding is None:
            return None
        return binding.policy.choose(PrefillState(self.catalog, binding.request, position))

    def forget(self, request_id: str) -> None:
        self._bound.pop(request_id, None)


def padded_graph(tokens: int, capture_sizes: Sequence[int]) -> int:
    """The graph a step of `tokens` runs: the smallest capture size that holds it (a CUDA graph
    pads up to it), or `tokens` itself where nothing pads (no capture sizes, as on the CPU, or a
    step larger than the largest graph, which runs eagerly)."""
    i = bisect_left(capture_sizes, tokens)
    return capture_sizes[i] if i < len(capture_sizes) else tokens
