"""Catalog health: is a boot's measurement to be trusted, and what would it be with the drift fixed?

The pull request's rule bypasses measurement drift (a slow capture over-measures a graph 1.6x);
the narrower alternative it names is to fix the drift. This module makes that alternative
concrete: it flags the shapes a boot measured implausibly, and builds a `repaired` catalog with
those shapes replaced, saying what was replaced and from what.

Checks, per boot: outlier (at least `MIN_BOOTS_TO_COMPARE` boots measured the shape: against what
the *other* boots predict, so one bad boot cannot move its own yardstick), else off-fit (against a
Theil-Sen fit of the boot's own graphs, which one bad graph cannot bend), and non-monotonic; across
boots, each shape's noise. An outlier is `SLOWER_SIGMAS` (slower) or `FASTER_SIGMAS` (faster)
standard deviations off at the design noise `DESIGN_SIGMA`: set for the false-alarm target (clean
boots flagged under 1 %), since no detector can also catch every 1.3x under unbounded 5 % noise.
`docs/decisions.md` states each check, its thresholds and the measured detection rates
(`bench/health_bench.py` measures them; `tests/scheduler_core/test_health.py` asserts them).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .catalog import Catalog, Graph

DESIGN_SIGMA = 0.05
SLOWER_SIGMAS = 3.2
FASTER_SIGMAS = 4.5
FIT_OUTLIER_SIGMAS = 4.0
DEPARTS_SIGMAS = 4.0
MAD_TO_SIGMA = 1.4826
CHI2_1_MEDIAN = 0.4549
OFF_FIT_RATIO = 1.5
MONOTONIC_SLACK = 1.10
NOISY_RATIO = 1.3
MIN_BOOTS_TO_COMPARE = 3

Shape = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Flag:
    """One shape of a boot that should not be trusted: why, and by how much (measured / reference)."""

    prefill: int
    decode: int
    reason: str
    ratio: float

    def to_dict(self) -> dict[str, Any]:
        return {"prefill": self.prefill, "decode": self.decode, "reason": self.reason, "ratio": round(self.ratio, 4)}


@dataclass(frozen=True, slots=True)
class AffineFit:
    """fixed + per-token cost of the solo prefill graphs, fitted robustly (Theil-Sen)."""

    fixed_ms: float
    ms_per_token: float

    def predict(self, prefill: int) -> float:
        return self.fixed_ms + prefill * self.ms_per_token

    def to_dict(self) -> dict[str, Any]:
        return {"fixed_ms": round(self.fixed_ms, 6), "ms_per_token": round(self.ms_per_token, 9)}


@dataclass(frozen=True)
class BootHealth:
    flagged: tuple[Flag, ...]
    fit: AffineFit | None
    compared_with: int  # boots of the recipe this one was judged against (itself included)

    @property
    def status(self) -> str:
        return "flagged" if self.flagged else "ok"

    def shapes(self) -> set[Shape]:
        return {(f.prefill, f.decode) for f in self.flagged}

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "flagged": [f.to_dict() for f in self.flagged],
            "fit": self.fit.to_dict() if self.fit else None,
            "compared_with": self.compared_with,
        }


def affine_fit(catalog: Catalog) -> AffineFit | None:
    """Theil-Sen: the median pairwise slope, then the median intercept; None under two measured graphs."""
    points = [(g.prefill, g.ms) for g in catalog.of_kind("prefill") if g.ms is not None]
    if len(points) < 2:
        return None
    slopes = [(b_ms - a_ms) / (b - a) for i, (a, a_ms) in enumerate(points) for b, b_ms in points[i + 1 :] if b != a]
    slope = statistics.median(slopes)
    return AffineFit(statistics.median(ms - slope * p for p, ms in points), slope)


def measured_by_shape(catalogs: Sequence[Catalog]) -> dict[Shape, list[float]]:
    """Every boot's measurement of each shape (unmeasured graphs left out)."""
    out: dict[Shape, list[float]] = {}
    for catalog in catalogs:
        for g in catalog.graphs:
            if g.ms is not None:
                out.setdefault(g.shape, []).append(g.ms)
    return out


@dataclass(frozen=True, slots=True)
class _Sums:
    """Weighted least-squares sums of (prefill, ms) points: the affine fit in closed form, and
    without one point by subtraction."""

    w: float = 0.0
    wx: float = 0.0
    wxx: float = 0.0
    wy: float = 0.0
    wxy: float = 0.0

    def plus(self, x: float, y: float, w: float, sign: float = 1.0) -> _Sums:
        w *= sign
        return _Sums(self.w + w, self.wx + w * x, self.wxx + w * x * x, self.wy + w * y, self.wxy + w * x * y)

    def fit(self) -> AffineFit | None:
        det = self.w * self.wxx - self.wx * self.wx
        if det <= 1e-12 * max(self.w * self.wxx, 1e-300):  # under two distinct capacities
            return None
        return AffineFit((self.wxx * self.wy - self.wx * self.wxy) / det, (self.w * self.wxy - self.wx * self.wy) / det)


@dataclass(frozen=True)
class PooledFit:
    """fixed + per-token cost of the solo prefill graphs of several boots together, fitted on
    relative error (measurement noise is multiplicative: each point weighted by 1 / cost^2), the
    points `FIT_OUTLIER_SIGMAS` robust deviations off the first fit left out (a drifted graph
    cannot bend it). `without(i, prefill)` is the same fit without that one measurement."""

    fit: AffineFit | None
    kept: dict[tuple[int, int], tuple[float, float, float]]  # (boot, prefill) -> (x, y, weight)
    sums: _Sums

    @classmethod
    def of(cls, catalogs: Sequence[Catalog]) -> PooledFit:
        points = {
            (i, g.prefill): (float(g.prefill), g.ms)
            for i, c in enumerate(catalogs)
            for g in c.of_kind("prefill")
            if g.ms is not None and g.ms > 0
        }
        first = _Sums()
        for x, y in points.values():
            first = first.plus(x, y, 1 / (y * y))
        rough = first.fit()
        if rough is None:
            return cls(None, {}, _Sums())
        logs = {k: math.log(y / p) if (p := rough.predict(int(x))) > 0 else math.inf for k, (x, y) in points.items()}
        spread = MAD_TO_SIGMA * statistics.median(abs(r) for r in logs.values())
        kept: dict[tuple[int, int], tuple[float, float, float]] = {}
        sums = _Sums()
        for k, (x, y) in points.items():
            if abs(logs[k]) <= FIT_OUTLIER_SIGMAS * spread:
                weight = 1 / rough.predict(int(x)) ** 2
                kept[k] = (x, y, weight)
                sums = sums.plus(x, y, weight)
        return cls(sums.fit(), kept, sums)

    def without(self, index: int, prefill: int) -> AffineFit | None:
        point = self.kept.get((index, prefill))
        return self.fit if point is None else self.sums.plus(*point, sign=-1.0).fit()


@dataclass(frozen=True)
class _Yardstick:
    """What a recipe's boots say about measurement noise and about the affine model, in log space."""

    boots: tuple[Catalog, ...]
    logs: dict[Shape, list[tuple[int, float]]]  # shape -> [(boot index, log ms)]
    noise_var: float  # one measurement's variance (log), pooled over shapes
    departure_var: float  # how far the shapes truly sit from the pooled affine fit (log, variance)
    departs: frozenset[Shape]  # shapes every boot agrees are off the fit: judged across boots only
    pooled: PooledFit

    @classmethod
    def of(cls, boots: Sequence[Catalog]) -> _Yardstick:
        logs: dict[Shape, list[tuple[int, float]]] = {}
        for i, catalog in enumerate(boots):
            for g in catalog.graphs:
                if g.ms is not None and g.ms > 0:
                    logs.setdefault(g.shape, []).append((i, math.log(g.ms)))
        noise_var = _pooled_noise_var([[v for _, v in values] for values in logs.values()])
        pooled = PooledFit.of(boots)
        fit = pooled.fit
        departures: dict[Shape, float] = {}
        null_var: dict[Shape, float] = {}
        for shape, values in logs.items():
            predicted = fit.predict(shape[0]) if fit is not None and shape[1] == 0 and shape[0] > 0 else 0.0
            if predicted > 0 and len(values) >= MIN_BOOTS_TO_COMPARE:
                departures[shape] = statistics.median(v for _, v in values) - math.log(predicted)
                null_var[shape] = noise_var * _median_var_factor(len(values))
        departure_var = 0.0
        if departures:  # robust: one drifted shape cannot make the model look wrong everywhere
            departure_var = max(0.0, statistics.median(d * d for d in departures.values()) / CHI2_1_MEDIAN)
            departure_var = max(0.0, departure_var - statistics.median(null_var.values()))
        departs = frozenset(s for s, d in departures.items() if abs(d) > DEPARTS_SIGMAS * math.sqrt(null_var[s]))
        return cls(tuple(boots), logs, noise_var, departure_var, departs, pooled)

    def reference(self, index: int, shape: Shape) -> Reference | None:
        """What boot `index` should have measured for `shape`, from the other boots only: the
        median of their measurements of the shape, drawn towards the affine fit of the solo prefill
        graphs (without this measurement) as far as the shapes' departure from that fit is small
        against the noise of that median (empirical Bayes). None under `MIN_BOOTS_TO_COMPARE` boots."""
        others = [v for i, v in self.logs.get(shape, []) if i != index]
        if len(others) + 1 < MIN_BOOTS_TO_COMPARE:
            return None
        across, across_factor = statistics.median(others), _median_var_factor(len(others))
        fit = None if shape[1] != 0 or shape[0] <= 0 or shape in self.departs else self.pooled.without(index, shape[0])
        predicted = fit.predict(shape[0]) if fit is not None else 0.0
        if predicted <= 0:
            return Reference(math.exp(across), len(others), across_factor)
        across_var = self.noise_var * across_factor
        total = self.departure_var + across_var
        weight = 1.0 if total <= 0 else self.departure_var / total
        log_fit = math.log(predicted)
        fit_factor = 2 / max(len(self.pooled.kept) - 1, 2)  # a 2-parameter fit's mean leverage
        factor = weight**2 * across_factor + (1 - weight) ** 2 * fit_factor
        return Reference(math.exp(log_fit + weight * (across - log_fit)), len(others), factor)


@dataclass(frozen=True, slots=True)
class Reference:
    """What a measurement is compared with: the value, how many other boots it comes from, and
    its own variance in units of one measurement's (how much noise it adds to the comparison)."""

    ms: float
    others: int
    var_factor: float

    def thresholds(self) -> tuple[float, float]:
        """(slower, faster) ratios beyond which a measurement is an outlier: `SLOWER_SIGMAS` and
        `FASTER_SIGMAS` standard deviations of the comparison at the design noise."""
        spread = DESIGN_SIGMA * math.sqrt(1 + self.var_factor)
        return math.exp(SLOWER_SIGMAS * spread), math.exp(FASTER_SIGMAS * spread)


def _median_var_factor(n: int) -> float:
    """Variance of the median of n normal draws, in units of one draw's (pi/2n for large n)."""
    return 1.0 / n if n <= 2 else math.pi / (2 * n)


def _pooled_noise_var(samples: Sequence[Sequence[float]]) -> float:
    """One measurement's variance: the median over shapes of each shape's sample variance across
    boots, scaled by the median of chi-square/df (so one drifted shape does not inflate it)."""
    variances = [(statistics.variance(s), len(s) - 1) for s in samples if len(s) >= 2]
    if not variances:
        return 0.0
    df = statistics.median(d for _, d in variances)
    return statistics.median(v for v, _ in variances) / (1 - 2 / (9 * df)) ** 3


def boot_health(catalog: Catalog, recipe_boots: Sequence[Catalog]) -> BootHealth:
    """Judge one boot against the recipe's boots (`recipe_boots` may include it; it is counted once)."""
    boots = list(recipe_boots) if any(b is catalog for b in recipe_boots) else [catalog, *recipe_boots]
    return _judge(catalog, next(i for i, b in enumerate(boots) if b is catalog), _Yardstick.of(boots))


def boots_health(catalogs: Sequence[Catalog]) -> list[BootHealth]:
    """Every boot of a recipe judged against the others (the recipe-wide figures computed once)."""
    yardstick = _Yardstick.of(catalogs)
    return [_judge(c, i, yardstick) for i, c in enumerate(catalogs)]


def _judge(catalog: Catalog, index: int, yardstick: _Yardstick) -> BootHealth:
    fit = affine_fit(catalog)
    flags: dict[Shape, Flag] = {}
    for g in catalog.graphs:
        boots_measuring = len(yardstick.logs.get(g.shape, []))
        flag = _outlier(g, yardstick.reference(index, g.shape)) or _off_fit(g, fit, boots_measuring)
        if flag:
            flags[g.shape] = flag
    for flag in _non_monotonic(catalog):
        flags.setdefault((flag.prefill, flag.decode), flag)
    ordered = tuple(flags[s] for s in sorted(flags))
    return BootHealth(ordered, fit, len(yardstick.boots))


def _outlier(g: Graph, reference: Reference | None) -> Flag | None:
    if g.ms is None or reference is None:
        return None
    ratio = g.ms / reference.ms
    slower, faster = reference.thresholds()
    if 1 / faster < ratio < slower:
        return None
    side = "slower" if ratio > 1 else "faster"
    reason = f"outlier: {ratio:.2f}x what the recipe's {reference.others} other boots predict ({side})"
    return Flag(g.prefill, g.decode, reason, ratio)


def _off_fit(g: Graph, fit: AffineFit | None, boots_measuring: int) -> Flag | None:
    """The fallback when too few boots measured the shape to compare them."""
    if g.ms is None or fit is None or g.kind != "prefill" or boots_measuring >= MIN_BOOTS_TO_COMPARE:
        return None
    predicted = fit.predict(g.prefill)
    if predicted <= 0:
        return None
    ratio = g.ms / predicted
    if max(ratio, 1 / ratio) < OFF_FIT_RATIO:
        return None
    return Flag(g.prefill, g.decode, f"off-fit: {ratio:.2f}x the affine fit of this boot", ratio)


def _non_monotonic(catalog: Catalog) -> list[Flag]:
    solo = [g for g in catalog.of_kind("prefill") if g.ms is not None]
    solo.sort(key=lambda g: g.prefill)
    flags = []
    for smaller, larger in zip(solo, solo[1:], strict=False):
        assert smaller.ms is not None and larger.ms is not None
        if smaller.ms > larger.ms * MONOTONIC_SLACK:
            reason = f"non-monotonic: measured slower than the larger graph {larger.prefill}"
            flags.append(Flag(smaller.prefill, smaller.decode, reason, smaller.ms / larger.ms))
    return flags


@dataclass(frozen=True, slots=True)
class ShapeNoise:
    """One shape's spread over a recipe's boots: p90 / p10 of its measurements."""

    prefill: int
    decode: int
    boots: int
    p10_ms: float
    p90_ms: float

    @property
    def ratio(self) -> float:
        return self.p90_ms / self.p10_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefill": self.prefill,
            "decode": self.decode,
            "boots": self.boots,
            "p10_ms": round(self.p10_ms, 6),
            "p90_ms": round(self.p90_ms, 6),
            "ratio": round(self.ratio, 4),
            "noisy": self.ratio >= NOISY_RATIO,
        }


def shape_noise(catalogs: Sequence[Catalog]) -> list[ShapeNoise]:
    """Per shape measured by at least two boots (inclusive deciles, as gpu_runner reports launches)."""
    out = []
    for (prefill, decode), values in sorted(measured_by_shape(catalogs).items()):
        if len(values) < 2:
            continue
        deciles = statistics.quantiles(values, n=10, method="inclusive")
        out.append(ShapeNoise(prefill, decode, len(values), deciles[0], deciles[8]))
    return out


@dataclass(frozen=True)
class Repair:
    """A boot with its flagged shapes replaced, and the record of each replacement."""

    catalog: Catalog
    replaced: tuple[dict[str, Any], ...]

    def record(self) -> dict[str, Any]:
        """The repair record a job's `catalog_sources` keeps beside the boot's id."""
        return {"repaired": True, "replaced": list(self.replaced)}


def repaired(catalog: Catalog, recipe_boots: Sequence[Catalog]) -> Repair:
    """Flagged shapes replaced by the median of the recipe's other boots that measured them
    (those not flagged there themselves), or by this boot's affine fit when there are none.
    Each replacement names the boots its median came from by their positions in `recipe_boots`
    (`from_index`; empty for the fit), so a caller holding their ids can say which boots."""
    given = list(recipe_boots)
    boots = given if any(b is catalog for b in given) else [catalog, *given]
    offset = len(boots) - len(given)  # 1 when `catalog` was put in front of the recipe's boots
    healths = boots_health(boots)
    health = next(h for b, h in zip(boots, healths, strict=True) if b is catalog)
    trusted: dict[Shape, list[tuple[int, float]]] = {}  # shape -> (position in recipe_boots, ms)
    for i, (other, other_health) in enumerate(zip(boots, healths, strict=True)):
        if other is catalog:
            continue
        doubtful = other_health.shapes()
        for g in other.graphs:
            if g.ms is not None and g.shape not in doubtful:
                trusted.setdefault(g.shape, []).append((i - offset, g.ms))
    new_ms: dict[Shape, float] = {}
    replaced = []
    for flag in health.flagged:
        shape = (flag.prefill, flag.decode)
        was = catalog.graph(*shape)
        assert was is not None
        sources = trusted.get(shape, [])
        if sources:
            value, source = statistics.median(ms for _, ms in sources), f"median of {len(sources)} other boots"
        elif health.fit is not None and flag.decode == 0 and health.fit.predict(flag.prefill) > 0:
            value, source = health.fit.predict(flag.prefill), "affine fit of this boot"
        else:
            value, source = None, "kept: nothing to replace it"
        if value is not None:
            new_ms[shape] = value
        replaced.append(
            {
                **flag.to_dict(),
                "was_ms": was.ms,
                "ms": was.ms if value is None else round(value, 6),
                "source": source,
                "from_index": [i for i, _ in sources],
            }
        )
    fixed = catalog.replace_ms(lambda g: new_ms.get(g.shape, g.ms))
    return Repair(fixed, tuple(replaced))
