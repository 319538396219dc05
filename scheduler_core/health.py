"""Catalog health: is a boot's measurement to be trusted, and what would it be with the drift fixed?

The pull request's rule bypasses measurement drift (a slow capture over-measures a graph 1.6x);
the narrower alternative it names is to fix the drift. This module makes that alternative
concrete: it flags the shapes a boot measured implausibly, and builds a `repaired` catalog with
those shapes replaced, saying what was replaced and from what.

Checks, per boot:
- outlier: a shape measured `OUTLIER_RATIO` or more away (either way) from the median of every
  boot of the recipe that measured it; needs at least three boots, so one bad boot cannot move
  the median it is judged against;
- off-fit: with fewer boots to compare, a solo prefill graph `OFF_FIT_RATIO` away from an affine
  fit (fixed + per-token cost, Theil-Sen, so one bad graph cannot bend it) of the boot's own graphs;
- non-monotonic: a solo prefill graph measured `MONOTONIC_SLACK` slower than a larger one.
Across boots, each shape's noise is the p90/p10 of its measurements.

Thresholds: ln(1.3) is the smallest over-measure that must be caught; 1.15 sits halfway (in log)
between a faithful measurement and that. It separates them fully when each measurement is within
5 % of the truth; under unbounded log-normal noise of sigma 0.05 no threshold can (the gap is
5.2 sigma, so about 0.4 % of each side crosses 1.15: `bench/health_bench.py` measures it).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .catalog import Catalog, Graph

OUTLIER_RATIO = 1.15
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


def boot_health(catalog: Catalog, recipe_boots: Sequence[Catalog]) -> BootHealth:
    """Judge one boot against the recipe's boots (`recipe_boots` may include it; it is counted once)."""
    boots = list(recipe_boots) if any(b is catalog for b in recipe_boots) else [catalog, *recipe_boots]
    by_shape = measured_by_shape(boots)
    fit = affine_fit(catalog)
    flags: dict[Shape, Flag] = {}
    for g in catalog.graphs:
        flag = _outlier(g, by_shape.get(g.shape, [])) or _off_fit(g, fit, len(by_shape.get(g.shape, [])))
        if flag:
            flags[g.shape] = flag
    for flag in _non_monotonic(catalog):
        flags.setdefault((flag.prefill, flag.decode), flag)
    ordered = tuple(flags[s] for s in sorted(flags))
    return BootHealth(ordered, fit, len(boots))


def _outlier(g: Graph, measurements: list[float]) -> Flag | None:
    if g.ms is None or len(measurements) < MIN_BOOTS_TO_COMPARE:
        return None
    ratio = g.ms / statistics.median(measurements)
    if max(ratio, 1 / ratio) < OUTLIER_RATIO:
        return None
    side = "slower" if ratio > 1 else "faster"
    return Flag(g.prefill, g.decode, f"outlier: {ratio:.2f}x the median of {len(measurements)} boots ({side})", ratio)


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


def recipe_health(catalogs: Sequence[Catalog]) -> dict[str, Any]:
    """A recipe's boots at a glance: each boot's health (in the order given) and each shape's noise."""
    healths = [boot_health(c, catalogs) for c in catalogs]
    return {
        "boots": [h.to_dict() for h in healths],
        "flagged_boots": sum(h.status == "flagged" for h in healths),
        "noise": [n.to_dict() for n in shape_noise(catalogs)],
    }


@dataclass(frozen=True)
class Repair:
    """A boot with its flagged shapes replaced, and the record of each replacement."""

    catalog: Catalog
    replaced: tuple[dict[str, Any], ...]

    def provenance(self) -> dict[str, Any]:
        return {"repaired": True, "replaced": list(self.replaced)}


def repaired(catalog: Catalog, recipe_boots: Sequence[Catalog]) -> Repair:
    """Flagged shapes replaced by the median of the recipe's other boots that measured them
    (those not flagged there themselves), or by this boot's affine fit when there are none."""
    others = [b for b in recipe_boots if b is not catalog]
    health = boot_health(catalog, recipe_boots)
    trusted: dict[Shape, list[float]] = {}
    for other in others:
        doubtful = boot_health(other, recipe_boots).shapes()
        for g in other.graphs:
            if g.ms is not None and g.shape not in doubtful:
                trusted.setdefault(g.shape, []).append(g.ms)
    new_ms: dict[Shape, float] = {}
    replaced = []
    for flag in health.flagged:
        shape = (flag.prefill, flag.decode)
        was = catalog.graph(*shape)
        assert was is not None
        if trusted.get(shape):
            value, source = statistics.median(trusted[shape]), f"median of {len(trusted[shape])} other boots"
        elif health.fit is not None and flag.decode == 0 and health.fit.predict(flag.prefill) > 0:
            value, source = health.fit.predict(flag.prefill), "affine fit of this boot"
        else:
            replaced.append({**flag.to_dict(), "was_ms": was.ms, "ms": was.ms, "source": "kept: nothing to replace it"})
            continue
        new_ms[shape] = value
        replaced.append({**flag.to_dict(), "was_ms": was.ms, "ms": round(value, 6), "source": source})
    fixed = catalog.replace_ms(lambda g: new_ms.get(g.shape, g.ms))
    return Repair(fixed, tuple(replaced))
