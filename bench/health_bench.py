"""Catalog health detection rates against the issue's targets, under two readings of "5 % noise".

    python bench/health_bench.py [trials]

Within 5 % (each measurement within +-5 % of the truth, as the tests use) the 1.15x threshold
separates a 1.3x over-measure from noise completely. Under unbounded log-normal noise of sigma
0.05 (`scheduler_core.catalog.noise`) no threshold can: the over-measure is 5.2 sigma, so a few
per thousand of each side cross. The figures say how many.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduler_core.catalog import Catalog, drift, noise
from scheduler_core.execution import AffineExecution, measured_catalog
from scheduler_core.health import boot_health

CLEAN = measured_catalog(AffineExecution())
Noise = Callable[[Catalog, int], Catalog]


def within_5_percent(catalog: Catalog, seed: int) -> Catalog:
    rng = random.Random(seed)
    return catalog.replace_ms(lambda g: None if g.ms is None else g.ms * rng.uniform(0.95, 1.05))


def log_normal_5_percent(catalog: Catalog, seed: int) -> Catalog:
    return noise(catalog, seed=seed, sigma=0.05)


def rates(noisy: Noise, boots: int, trials: int) -> tuple[float, float]:
    """(share of injected 1.3x over-measures missed, share of clean boots flagged)."""
    rng = random.Random(0)
    missed = clean_flagged = 0
    for trial in range(trials):
        catalogs = [noisy(CLEAN, trial * 1000 + b) for b in range(boots)]
        clean_flagged += sum(boot_health(c, catalogs).status == "flagged" for c in catalogs)
        victim, capacity = rng.randrange(boots), rng.choice(CLEAN.capacities)
        catalogs[victim] = drift(catalogs[victim], capacity, 1.3)
        missed += (capacity, 0) not in boot_health(catalogs[victim], catalogs).shapes()
    return missed / trials, clean_flagged / (trials * boots)


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print(f"{trials} trials per row; targets: missed 0, clean boots flagged < 1 %")
    for label, noisy in (("within 5 %", within_5_percent), ("log-normal sigma 0.05", log_normal_5_percent)):
        for boots in (3, 5, 10):
            missed, flagged = rates(noisy, boots, trials)
            print(f"{label:<22} {boots:>3} boots  missed {missed:7.2%}  clean boots flagged {flagged:7.2%}")


if __name__ == "__main__":
    main()
