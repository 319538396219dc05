"""Catalogs of captured graphs: shapes, measured durations, and the perturbations maintainers worry about.

A catalog is what an engine measures at boot. Solo prefill uses the graphs with `decode == 0` and
`prefill > 0`; decode-only and mixed shapes are kept for the multi-lane scheduler.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInput
from .limits import MAX_DURATION_MS, MAX_TOKENS
from .validation import reject_unknown_keys, require_int, require_list, require_mapping, require_number

DEFAULT_PREFILL_CAPACITIES: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048, 4096)
# What a catalog may hold (every front end reads catalogs through `Catalog.from_dicts`; the web's
# schema states the same bounds): a graph's token capacities, its duration, how many graphs.
MAX_CAPACITY = MAX_TOKENS  # 1,048,576 tokens (prefill) or rows (decode)
MAX_MS = MAX_DURATION_MS  # a graph that takes over 1,000 s is a unit mistake
MAX_GRAPHS = 256


@dataclass(frozen=True, slots=True)
class Graph:
    """One captured graph: `prefill` tokens plus `decode` rows; `ms` is None when unmeasured."""

    prefill: int
    decode: int
    ms: float | None

    @property
    def shape(self) -> tuple[int, int]:
        return (self.prefill, self.decode)

    @property
    def kind(self) -> str:
        if self.decode == 0:
            return "prefill" if self.prefill > 0 else "init"
        return "decode" if self.prefill == 0 else "mixed"

    def to_dict(self) -> dict[str, Any]:
        return {"prefill": self.prefill, "decode": self.decode, "ms": self.ms}


@dataclass(frozen=True)
class Catalog:
    """An immutable, validated set of graphs with the lookups the policies need precomputed.

    `pads`: whether the engine runs a launch padded to its graph (a GPU replaying captured graphs)
    or at exactly the tokens it carries (a CPU, which captures none; a boot says which in its
    provenance). Policies plan on the graphs either way; the step loop costs an unpadded chunk at
    its own size (`execution.unpadded_ms`) and counts no padding."""

    graphs: tuple[Graph, ...]
    pads: bool = True
    capacities: tuple[int, ...] = field(init=False, repr=False, compare=False)
    prefill_ms: dict[int, float | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        seen: set[tuple[int, int]] = set()
        for index, graph in enumerate(self.graphs):
            if graph.shape in seen:
                raise InvalidInput(
                    f"catalog[{index}]", f"duplicate shape prefill={graph.prefill} decode={graph.decode}"
                )
            seen.add(graph.shape)
        solo = sorted((g for g in self.graphs if g.kind == "prefill"), key=lambda g: g.prefill)
        if not solo:
            raise InvalidInput("catalog", "has no solo prefill graph (decode == 0 and prefill > 0)")
        object.__setattr__(self, "capacities", tuple(g.prefill for g in solo))
        object.__setattr__(self, "prefill_ms", {g.prefill: g.ms for g in solo})

    @property
    def full_chunk(self) -> int:
        """The largest solo prefill capacity: the chunk size while a long segment remains."""
        return self.capacities[-1]

    def predicted_ms(self, capacity: int) -> float:
        """The cost-based policy's view of a launch: its measurement, or 0 when unmeasured."""
        ms = self.prefill_ms[capacity]
        return 0.0 if ms is None else ms

    def graph(self, prefill: int, decode: int) -> Graph | None:
        for g in self.graphs:
            if g.prefill == prefill and g.decode == decode:
                return g
        return None

    def of_kind(self, kind: str) -> tuple[Graph, ...]:
        return tuple(g for g in self.graphs if g.kind == kind)

    def prefill_sizes(self) -> dict[int, tuple[int, ...]]:
        """The prefill sizes of the graphs at each decode row count, ascending: what a launch of
        any size between them is costed on where nothing pads (`execution.unpadded_ms`)."""
        sizes: dict[int, list[int]] = {}
        for g in self.graphs:
            if g.prefill:
                sizes.setdefault(g.decode, []).append(g.prefill)
        return {d: tuple(sorted(ps)) for d, ps in sizes.items()}

    def to_dicts(self) -> list[dict[str, Any]]:
        return [g.to_dict() for g in self.graphs]

    @classmethod
    def from_dicts(cls, items: Any, field_name: str = "catalog") -> Catalog:
        """Parse and validate a JSON catalog; every error names the offending entry."""
        items = require_list(items, field_name)
        if len(items) > MAX_GRAPHS:
            raise InvalidInput(field_name, f"has {len(items)} graphs, at most {MAX_GRAPHS} allowed")
        graphs = [_parse_graph(item, f"{field_name}[{i}]") for i, item in enumerate(items)]
        try:
            return cls(tuple(graphs))
        except InvalidInput as exc:
            if exc.field == "catalog" and field_name != "catalog":
                raise InvalidInput(field_name, exc.message) from None
            raise

    def replace_ms(self, new_ms: Callable[[Graph], float | None]) -> Catalog:
        return Catalog(tuple(Graph(g.prefill, g.decode, _normalise_ms(new_ms(g))) for g in self.graphs), self.pads)


def _normalise_ms(ms: float | None) -> float | None:
    """`null` and `0` both mean unmeasured (the engine stores 0 for a graph it never timed)."""
    return None if ms is None or ms == 0 else float(ms)


def _parse_graph(item: Any, field_name: str) -> Graph:
    data = require_mapping(item, field_name)
    reject_unknown_keys(data, {"prefill", "decode", "ms"}, field_name)
    for key in ("prefill", "decode"):
        if key not in data:
            raise InvalidInput(f"{field_name}.{key}", "is required")
    prefill = require_int(data["prefill"], f"{field_name}.prefill", minimum=0, maximum=MAX_CAPACITY)
    decode = require_int(data["decode"], f"{field_name}.decode", minimum=0, maximum=MAX_CAPACITY)
    ms = data.get("ms")
    if ms is not None:
        ms = require_number(ms, f"{field_name}.ms", minimum=0, maximum=MAX_MS)
    return Graph(prefill, decode, _normalise_ms(ms))


def build_catalog(
    ms_of: Callable[[int, int], float | None],
    *,
    capacities: Sequence[int] = DEFAULT_PREFILL_CAPACITIES,
    decode_rows: Sequence[int] = (),
    mixed: Iterable[tuple[int, int]] = (),
) -> Catalog:
    """A catalog whose every shape is measured by `ms_of(prefill, decode)`."""
    shapes = [(c, 0) for c in capacities] + [(0, d) for d in decode_rows] + list(mixed)
    return Catalog(tuple(Graph(p, d, _normalise_ms(ms_of(p, d))) for p, d in shapes))


# Perturbations: each returns a new catalog; the true execution model is never touched.


def drift(catalog: Catalog, capacity: int, factor: float) -> Catalog:
    """A slow capture: the solo prefill graph `capacity` over-measured by `factor`."""
    if capacity not in catalog.prefill_ms:
        raise InvalidInput(
            "drift.capacity", f"{capacity} is not a prefill capacity of the catalog {list(catalog.capacities)}"
        )
    return catalog.replace_ms(
        lambda g: g.ms * factor if (g.kind == "prefill" and g.prefill == capacity and g.ms is not None) else g.ms
    )


def noise(catalog: Catalog, *, seed: int, sigma: float) -> Catalog:
    """Per-boot measurement noise: every measured graph scaled by exp(N(0, sigma)), seeded."""
    rng = random.Random(seed)
    return catalog.replace_ms(lambda g: None if g.ms is None else g.ms * math.exp(rng.gauss(0.0, sigma)))


def unmeasured(catalog: Catalog, capacities: Iterable[int]) -> Catalog:
    """Graphs captured but never timed: their `ms` becomes null."""
    drop = set(capacities)
    missing = drop - set(catalog.capacities)
    if missing:
        raise InvalidInput("unmeasured", f"{sorted(missing)} not prefill capacities of the catalog")
    return catalog.replace_ms(lambda g: None if (g.kind == "prefill" and g.prefill in drop) else g.ms)


def catalog_from_mapping(data: Mapping[int, float | None]) -> Catalog:
    """Shorthand for tests and scripts: {capacity: ms} for solo prefill graphs."""
    return Catalog(tuple(Graph(c, 0, _normalise_ms(ms)) for c, ms in sorted(data.items())))
