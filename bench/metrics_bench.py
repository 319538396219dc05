"""`/metrics` with 100 engines x 20 policy versions stored: bytes and time per scrape, against the
targets of 200 KB and 100 ms (issue 30).

Two histories of one recipe, every engine having posted requests (all histogram buckets filled)
and launches under every version:
- `rolling`: a version a day, as decisions come; only the last one posted within the window (1 h);
- `storm`: all 20 versions and 100 engines posted within the window (the bounds decide:
  HELIOS_METRICS_MAX_ENGINE_SERIES, HELIOS_METRICS_MAX_VERSIONS).
Each scrape is the real collector over a throwaway SQLite database (as `/metrics` computes it, view
and access check aside), timed 20 times; printed: median and worst wall and CPU time, size,
samples, and the load average (a loaded machine's wall times count the waits for a core). Then
`served`: a scrape as `/metrics` answers it while beat keeps a snapshot (`metrics_snapshot`: one
made, then read from the cache on Redis 20 times).

    .venv/bin/python bench/metrics_bench.py
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.support import stop, throwaway_site

ENGINES, VERSIONS, SCRAPES = 100, 20, 20
TARGET_BYTES, TARGET_MS = 200_000, 100.0


def store(history: str) -> None:
    from django.utils import timezone

    from heliosweb.recipes.services import recipe_create
    from heliosweb.telemetry import buckets
    from heliosweb.telemetry.models import Totals

    Totals.objects.all().delete()  # each history measured alone
    recipe = recipe_create(name=f"bench-{history}", policy="cost")
    rng, now = random.Random(30), timezone.now()
    rows = []
    for version in range(1, VERSIONS + 1):
        ago = timedelta(days=VERSIONS - version) if history == "rolling" else timedelta(minutes=VERSIONS - version)
        for e in range(ENGINES):
            hist = [rng.randint(1, 500) for _ in range(buckets.BUCKETS)]
            rows.append(
                Totals(
                    recipe=recipe,
                    engine=f"engine-{e:03d}",
                    version=version,
                    policy="cost" if version % 2 else "rule",
                    requests=sum(hist),
                    ttft_buckets=hist,
                    ttft_sum_ms=sum(hist) * 180.0,
                    itl_buckets=hist,
                    itl_sum_ms=sum(hist) * 25.0,
                    prefill_launches=rng.randint(10**5, 10**7),
                    launched_tokens=rng.randint(10**8, 10**9),
                    padded_tokens=rng.randint(10**6, 10**7),
                    seen_at=now - ago,
                )
            )
    Totals.objects.bulk_create(rows, batch_size=500)


def scrape(exposition: Callable[[], bytes]) -> tuple[list[float], list[float], int, int]:
    """Wall and CPU milliseconds of each scrape (CPU: this process's, the database's included, as
    SQLite runs in it; on a loaded machine wall time counts the waits for a core), bytes, samples."""
    wall, cpu, text = [], [], b""
    for _ in range(SCRAPES):
        start, start_cpu = time.perf_counter(), time.process_time()
        text = exposition()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    samples = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    return wall, cpu, len(text), samples


def main() -> None:
    tmp, procs = throwaway_site("helios-metrics-bench-")
    try:
        print(f"/metrics, {ENGINES} engines x {VERSIONS} versions stored, {SCRAPES} scrapes each (SQLite, in process)")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        head = f"{'history':<10}{'wall p50':>9}{'worst':>8}{'cpu p50':>9}{'worst':>8}{'KB':>8}{'samples':>9}"
        print(f"{head}   target: <= {TARGET_MS:.0f} ms, <= {TARGET_BYTES // 1000} KB")
        from heliosweb.telemetry.metrics import exposition
        from heliosweb.telemetry.metrics_snapshot import served_exposition, snapshot_store

        for history, served in (("rolling", False), ("storm", False), ("storm", True)):
            if served:
                snapshot_store(exposition)
                history = "served"
            else:
                store(history)
            wall, cpu, size, samples = scrape((lambda: served_exposition(exposition)) if served else exposition)
            verdict = ", ".join(
                f"{what} {'met' if ok else 'MISSED'}"
                for what, ok in (
                    ("size", size <= TARGET_BYTES),
                    ("cpu p50", statistics.median(cpu) <= TARGET_MS),
                    ("wall p50", statistics.median(wall) <= TARGET_MS),
                )
            )
            row = f"{statistics.median(wall):>9.1f}{max(wall):>8.1f}{statistics.median(cpu):>9.1f}{max(cpu):>8.1f}"
            print(f"{history:<10}{row}{size / 1000:>8.1f}{samples:>9}   {verdict}")
    finally:
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
