"""Catalog health detection rates against the issue's targets, under two readings of "5 % noise".

    python bench/health_bench.py [trials]

Targets (issue 13): an over-measure of one shape by 1.3x among >= 3 boots flagged every time;
clean boots flagged in under 1 % of cases. Within 5 % (every measurement within +-5 % of the
truth) the detector meets both. Under unbounded log-normal noise of sigma 0.05
(`scheduler_core.catalog.noise`) no detector can: the last line computes what one that knew every
graph's true cost would still miss at 1 % of clean boots flagged. The figures say how close
`scheduler_core.health` comes, and from which over-measure on it misses nothing.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduler_core.catalog import Catalog, drift, noise
from scheduler_core.execution import AffineExecution, measured_catalog
from scheduler_core.health import SLOWER_SIGMAS, boots_health

CLEAN = measured_catalog(AffineExecution())
FACTORS = (1.3, 1.4, 1.5)
Noise = Callable[[Catalog, int], Catalog]


def within_5_percent(catalog: Catalog, seed: int) -> Catalog:
    rng = random.Random(seed)
    return catalog.replace_ms(lambda g: None if g.ms is None else g.ms * rng.uniform(0.95, 1.05))


def log_normal_5_percent(catalog: Catalog, seed: int) -> Catalog:
    return noise(catalog, seed=seed, sigma=0.05)


def rates(noisy: Noise, boots: int, trials: int) -> tuple[dict[float, float], float]:
    """({factor: share of injected over-measures missed}, share of clean boots flagged)."""
    rng = random.Random(0)
    missed = dict.fromkeys(FACTORS, 0)
    clean_flagged = 0
    for trial in range(trials):
        catalogs = [noisy(CLEAN, trial * 1000 + b) for b in range(boots)]
        clean_flagged += sum(h.status == "flagged" for h in boots_health(catalogs))
        victim, capacity = rng.randrange(boots), rng.choice(CLEAN.capacities)
        for factor in FACTORS:
            injected = [drift(c, capacity, factor) if i == victim else c for i, c in enumerate(catalogs)]
            missed[factor] += (capacity, 0) not in boots_health(injected)[victim].shapes()
    return {f: m / trials for f, m in missed.items()}, clean_flagged / (trials * boots)


def oracle_miss(shapes: int, sigma: float = 0.05, clean_flagged: float = 0.01, factor: float = 1.3) -> float:
    """What a detector that knows each graph's true cost misses, at the one-sided threshold that
    flags `clean_flagged` of clean boots of `shapes` independently noisy shapes."""
    per_shape = 1 - (1 - clean_flagged) ** (1 / shapes)
    threshold = NormalDist(0, sigma).inv_cdf(1 - per_shape)
    return NormalDist(math.log(factor), sigma).cdf(threshold)


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print(f"{trials} trials per row, {len(CLEAN.graphs)} shapes per boot, slower threshold {SLOWER_SIGMAS} sigma")
    print("targets: 1.3x missed 0, clean boots flagged < 1 %")
    header = "  ".join(f"missed {f}x" for f in FACTORS)
    print(f"{'noise':<22} {'boots':>5}  {header}  clean boots flagged")
    for label, noisy in (("within 5 %", within_5_percent), ("log-normal sigma 0.05", log_normal_5_percent)):
        for boots in (3, 5, 10):
            missed, flagged = rates(noisy, boots, trials)
            cells = "  ".join(f"{missed[f]:>11.2%}" for f in FACTORS)
            print(f"{label:<22} {boots:>5}  {cells}  {flagged:>19.2%}")
    bound = oracle_miss(len(CLEAN.graphs))
    print(
        f"bound, log-normal sigma 0.05: knowing the true costs, 1 % of clean boots flagged -> {bound:.2%} of 1.3x missed"
    )


if __name__ == "__main__":
    main()
