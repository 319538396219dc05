"""Solo prefill policies behind one small interface: `choose(state) -> Launch | None`.

`cost` plans over the measured catalog, `rule` is pull request #22 with its liveness fix, and
`rule-v1` is the pre-fix rule kept to demonstrate the stall. A new policy is a new class plus
one line in `POLICIES`; every list of policies in the product is read from there.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol

from .catalog import Catalog
from .errors import InvalidInput
from .request import Request

REL_TOLERANCE = 1e-9
_MAX_CACHED_CATALOGS = 16  # a boots analysis walks many catalogs; keep the cache bounded


@dataclass(frozen=True, slots=True)
class Launch:
    """One solo prefill chunk: graph `graph` processes tokens [start, end)."""

    graph: int
    start: int
    end: int
    chooser: str  # the policy that chose the graph: "cost", "rule" (or its fallback "cost"), "rule-v1"
    predicted_ms: float

    @property
    def padding(self) -> int:
        return self.graph - (self.end - self.start)


@dataclass(frozen=True, slots=True)
class PrefillState:
    """What a policy sees: the catalog, the request, and how far its prefill has advanced."""

    catalog: Catalog
    request: Request
    position: int


class Policy(Protocol):
    name: ClassVar[str]
    selectable: ClassVar[bool]  # may it be a recipe's active policy?

    def choose(self, state: PrefillState) -> Launch | None:
        """The next chunk at `state.position`, or None when no candidate is left (a stall)."""
        ...


def surviving_candidates(catalog: Catalog, request: Request, position: int, segment_end: int) -> list[tuple[int, int]]:
    """The spec's candidate filter: (capacity, work) pairs left at `position`, ascending."""
    out: list[tuple[int, int]] = []
    previous_work = -1  # work is non-decreasing in capacity, so "a smaller graph does the same" is the previous one
    for capacity in catalog.capacities:
        work = request.consumed(position, capacity, segment_end)
        duplicate = work == previous_work
        previous_work = work
        if work == 0 or (duplicate and catalog.prefill_ms[capacity] is None):
            continue
        out.append((capacity, work))
    return out


def totals_equal(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOLERANCE * max(1.0, abs(a), abs(b))


# A plan's score, compared in the spec's order: (total predicted ms, launched tokens, launches, first graph).
Score = tuple[float, int, int, int]
_EMPTY: Score = (0.0, 0, 0, 0)


def _better(total: float, tokens: int, count: int, best: Score | None) -> bool:
    """Criteria 1-3; callers try larger first graphs first, so ties keep the larger one (criterion 4)."""
    if best is None:
        return True
    if not totals_equal(total, best[0]):
        return total < best[0]
    if tokens != best[1]:
        return tokens < best[1]
    return count < best[2]


def cheapest_per_token(catalog: Catalog) -> int:
    """The graph a long span-free stretch repeats under `cost`: the cheapest per token, the larger on a tie."""
    return min(catalog.capacities, key=lambda c: (catalog.predicted_ms(c) / c, -c))


class _RemainderTable:
    """Best plans for a span-free stretch, which depend only on the tokens remaining `r`.

    Filled bottom-up per residue class modulo the capacities' gcd and reused across decisions,
    requests and sweeps: this is what makes a cost decision cheap once amortised.

    Far enough past the full chunk the table becomes periodic: once `window` consecutive rows
    each equal the row one `star` graph shorter plus that graph, every later row does too
    (each row is a minimum over rows at most `window` back, all shifted by the same constant,
    so the same candidate wins). Rows beyond are then derived, not filled.
    """

    def __init__(self, catalog: Catalog) -> None:
        from functools import reduce
        from math import gcd

        self.capacities_desc = tuple(reversed(catalog.capacities))
        self.cost = {c: catalog.predicted_ms(c) for c in catalog.capacities}
        self.unmeasured = frozenset(c for c in catalog.capacities if catalog.prefill_ms[c] is None)
        self.step = reduce(gcd, catalog.capacities)
        self.full = catalog.full_chunk
        self.offsets = tuple((c, c // self.step, self.cost[c]) for c in self.capacities_desc)
        self.rows: dict[int, list[Score]] = {}
        self.star = cheapest_per_token(catalog)
        self.window = self.full // self.step
        self.streak: dict[int, int] = {}

    def best(self, remaining: int) -> Score:
        if remaining == 0:
            return _EMPTY
        residue = remaining % self.step
        row = self.rows.setdefault(residue, [])
        index = remaining // self.step
        # row[i] holds the answer for r = residue + i * step (r == 0 is the empty plan).
        while len(row) <= index:
            if self.streak.get(residue, 0) >= self.window:
                return self._periodic(row, index)
            i = len(row)
            r = residue + i * self.step
            row.append(_EMPTY if r == 0 else self._short(row, r) if r <= self.full else self._long(row, i))
            if r > self.full + self.star:
                self.streak[residue] = self.streak.get(residue, 0) + 1 if self._repeats(row, i) else 0
        return row[index]

    def _repeats(self, row: list[Score], i: int) -> bool:
        """Is row i the row one `star` graph shorter, plus that graph?"""
        t, k, n, first = row[i]
        pt, pk, pn, pfirst = row[i - self.star // self.step]
        return first == pfirst and k == pk + self.star and n == pn + 1 and totals_equal(t, pt + self.cost[self.star])

    def _periodic(self, row: list[Score], index: int) -> Score:
        """A row past the filled ones: the last period's row plus m `star` graphs."""
        d = self.star // self.step
        m = -(-(index - (len(row) - 1)) // d)
        t, k, n, first = row[index - m * d]
        return (t + m * self.cost[self.star], k + m * self.star, n + m, first)

    def _short(self, row: list[Score], r: int) -> Score:
        """r <= full chunk: some graphs cover r, and the filter keeps only the smallest unmeasured one."""
        smallest_covering = min(c for c in self.capacities_desc if c >= r)
        best: Score | None = None
        for c in self.capacities_desc:
            if c >= r:
                if c in self.unmeasured and c != smallest_covering:
                    continue
                t, k, n = self.cost[c], c, 1
            else:
                rest = row[(r - c) // self.step]
                t, k, n = self.cost[c] + rest[0], c + rest[1], 1 + rest[2]
            if _better(t, k, n, best):
                best = (t, k, n, c)
        assert best is not None
        return best

    def _long(self, row: list[Score], i: int) -> Score:
        """r > full chunk: every graph does its full work. The hot loop of a long prompt, so `_better` is inlined."""
        (c, d, cost), *others = self.offsets
        bt, bk, bn, _ = row[i - d]
        bt, bk, bn, bc = cost + bt, c + bk, 1 + bn, c
        for c, d, cost in others:
            rt, rk, rn, _ = row[i - d]
            t = cost + rt
            diff = t - bt
            scale = t if t > bt else bt
            tolerance = REL_TOLERANCE * scale if scale > 1.0 else REL_TOLERANCE
            if diff > tolerance:
                continue
            k = c + rk
            if diff >= -tolerance and (k > bk or (k == bk and rn + 1 >= bn)):
                continue
            bt, bk, bn, bc = t, k, rn + 1, c
        return (bt, bk, bn, bc)


class CostPolicy:
    """The measured catalog decides: first launch of the cheapest plan to the segment's end."""

    name: ClassVar[str] = "cost"
    selectable: ClassVar[bool] = True

    def __init__(self) -> None:
        self._tables: dict[int, tuple[Catalog, _RemainderTable]] = {}
        self._memo_owner: tuple[Catalog, Request, int] | None = None
        self._memo: dict[int, Score] = {}

    def _table(self, catalog: Catalog) -> _RemainderTable:
        entry = self._tables.get(id(catalog))
        if entry is None or entry[0] is not catalog:
            if len(self._tables) >= _MAX_CACHED_CATALOGS:
                self._tables.clear()
            entry = (catalog, _RemainderTable(catalog))
            self._tables[id(catalog)] = entry
        return entry[1]

    def choose(self, state: PrefillState) -> Launch | None:
        catalog, request, p = state.catalog, state.request, state.position
        e = request.segment_end(p)
        if not request.has_span_between(p, e):
            r = e - p
            if r <= 0:
                return None
            first = self._table(catalog).best(r)[3]
            return Launch(first, p, p + min(first, r), self.name, catalog.predicted_ms(first))
        target = request.cut(e)
        memo = self._span_memo(catalog, request, target)
        score = self._best_with_spans(catalog, request, p, e, target, memo)
        if score is None:
            return None
        first = score[3]
        return Launch(first, p, p + request.consumed(p, first, e), self.name, catalog.predicted_ms(first))

    def _span_memo(self, catalog: Catalog, request: Request, target: int) -> dict[int, Score]:
        owner = self._memo_owner
        if owner is None or owner[0] is not catalog or owner[1] is not request or owner[2] != target:
            self._memo_owner, self._memo = (catalog, request, target), {}
        return self._memo

    def _best_with_spans(
        self, catalog: Catalog, request: Request, p: int, e: int, target: int, memo: dict[int, Score]
    ) -> Score | None:
        """Memoised DP over absolute positions while spans can still cut a chunk."""
        table = self._table(catalog)

        def settled(q: int) -> Score | None:
            if q == target:
                return _EMPTY
            if q in memo:
                return memo[q]
            if not request.has_span_between(q, e):
                return table.best(e - q)
            return None

        stack = [p]
        while stack:
            q = stack[-1]
            if settled(q) is not None:
                stack.pop()
                continue
            candidates = surviving_candidates(catalog, request, q, e)
            missing = [q + w for _, w in candidates if settled(q + w) is None]
            if missing:
                stack.extend(missing)
                continue
            best: Score | None = None
            for c, w in reversed(candidates):
                rest = settled(q + w)
                assert rest is not None
                t, k, n = catalog.predicted_ms(c) + rest[0], c + rest[1], 1 + rest[2]
                if _better(t, k, n, best):
                    best = (t, k, n, c)
            if best is None:
                return None
            memo[q] = best
            stack.pop()
        return settled(p)


def rule_graph(catalog: Catalog, remaining: int) -> int:
    """PR #22's choice: the full chunk while a full chunk remains, else the smallest graph covering the rest."""
    caps = catalog.capacities
    if remaining >= caps[-1]:
        return caps[-1]
    return caps[bisect_left(caps, remaining)]


class RulePolicy:
    """PR #22 with the liveness fix: bail to the measured catalog when the rule's chunk would be filtered."""

    name: ClassVar[str] = "rule"
    selectable: ClassVar[bool] = True

    def __init__(self) -> None:
        self._fallback = CostPolicy()

    def choose(self, state: PrefillState) -> Launch | None:
        catalog, request, p = state.catalog, state.request, state.position
        e = request.segment_end(p)
        graph = rule_graph(catalog, e - p)
        work = request.consumed(p, graph, e)
        if work == 0 or catalog.prefill_ms[graph] is None:
            return self._fallback.choose(state)
        return Launch(graph, p, p + work, self.name, catalog.predicted_ms(graph))


class RuleV1Policy:
    """The pre-fix rule: one candidate, which the filter may drop, leaving a stall. Never selectable."""

    name: ClassVar[str] = "rule-v1"
    selectable: ClassVar[bool] = False

    def choose(self, state: PrefillState) -> Launch | None:
        catalog, request, p = state.catalog, state.request, state.position
        e = request.segment_end(p)
        graph = rule_graph(catalog, e - p)
        work = request.consumed(p, graph, e)
        if work == 0:
            return None
        i = catalog.capacities.index(graph)
        if catalog.prefill_ms[graph] is None and i > 0 and request.consumed(p, catalog.capacities[i - 1], e) == work:
            return None
        return Launch(graph, p, p + work, self.name, catalog.predicted_ms(graph))


# The one registry of policies, by name. Everything that offers a choice of policies (the CLI, the
# analyses' parameters, the web forms and API, decisions, the recipes' database constraint) reads
# it when asked, through `selectable_policies()` or this dict: a new policy is a class and one line here.
POLICIES: dict[str, type[Policy]] = {cls.name: cls for cls in (CostPolicy, RulePolicy, RuleV1Policy)}


# The pull request's comparison: its before (`cost`) and after (`rule`). Analyses that reproduce it
# (pr22, numerics) and their figures compare exactly these two, whatever else is registered.
PR22_POLICIES: tuple[Literal["cost"], Literal["rule"]] = ("cost", "rule")
# Its arms, by name: the prompt lengths it was measured on (3.5k: a 432-token tail after 2048 + 1024).
PR22_ARMS: dict[str, int] = {"3.5k": 3504, "14k": 14000}


def selectable_policies() -> tuple[str, ...]:
    """The policies a recipe may run (and analyses compare by default), in registration order."""
    return tuple(name for name, cls in POLICIES.items() if cls.selectable)


def policy_named(name: object, field: str = "policy") -> str:
    """A registered policy's name (analyses, telemetry records), else bad input of `field`."""
    if not isinstance(name, str) or name not in POLICIES:
        raise InvalidInput(field, f"unknown policy {name!r} (expected one of {sorted(POLICIES)})")
    return name


def recipe_policy_named(name: object, field: str = "policy") -> str:
    """A policy a recipe may run (created with, proposed, applied), else bad input of `field`."""
    choices = list(selectable_policies())
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(field, f"required: one of {choices}")
    if name in POLICIES and name not in choices:
        # rule-v1: the pre-fix rule that stalls solo requests; kept only to demonstrate the stall.
        raise InvalidInput(
            field,
            f"{name!r} can never be a recipe's active policy (it is kept only for analyses); expected one of {choices}",
        )
    if name not in choices:
        raise InvalidInput(field, f"unknown policy {name!r} (expected one of {choices})")
    return name


def make_policy(name: object, field: str = "policy") -> Policy:
    """A fresh policy object (policies cache per-catalog tables, so keep one per run)."""
    return POLICIES[policy_named(name, field)]()
