"""Speed of real traffic through scheduler_core against issue 19's targets, each run in a fresh
process pinned to one core (CPU seconds and peak memory of that process). Prints figures next to
the targets; it never fails on timing (the machines vary and are shared), so read it.

    python3 bench/traffic_bench.py [--only simulate|capacity|vidur|million]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scheduler_core.traffic import looped, read_trace  # noqa: E402 (after the path)

AZURE = ROOT / "tests" / "data" / "traces" / "azure-llm-2023-code.csv"

# What a child does: its work on one core, then its own CPU seconds (the work alone, and the whole
# process: start-up, imports and reading the trace included) and its peak memory, as JSON.
CHILD = """
import json, os, resource, sys, time
os.sched_setaffinity(0, {{min(os.sched_getaffinity(0))}})
sys.path.insert(0, {root!r})
from scheduler_core.analyses import ANALYSES
from scheduler_core.traffic import read_trace, summarise_trace
start = time.process_time()
{body}
work = time.process_time() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"work": work, "process": usage.ru_utime + usage.ru_stime, "mb": usage.ru_maxrss / 1024}}))
"""
BODIES = {
    "simulate": "a = ANALYSES['simulate']; a.run(a.validate({{'trace': read_trace({path!r})}}), lambda e: None)",
    "vidur": "a = ANALYSES['simulate']; t = read_trace({path!r}); start = time.process_time(); "
    "a.run(a.validate({{'trace': t, 'policies': ['cost']}}), lambda e: None)",
    "capacity": "a = ANALYSES['capacity']; a.run(a.validate({{'trace': read_trace({path!r}), 'steps': 8}}), lambda e: None)",
    "million": "summarise_trace(read_trace({path!r}))",
}


def measured(kind: str, path: Path) -> dict[str, float]:
    """{wall, work, process, mb} of one child doing `kind`: wall s, CPU s of the work alone and of the
    whole process, peak MB."""
    code = CHILD.format(root=str(ROOT), body=BODIES[kind].format(path=str(path)))
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return {"wall": time.perf_counter() - start, **json.loads(out.splitlines()[-1])}


def show(kind: str, path: Path, rows: list[tuple[str, str, str, float]]) -> None:
    """Run `kind` once and print each (label, figure, unit, target) row, then the wall time."""
    figures = measured(kind, path)
    for label, key, unit, target in rows:
        report(label, figures[key], unit, target)
    print(f"    (wall {figures['wall']:.2f} s on this machine)")


def report(name: str, value: float, unit: str, target: float) -> None:
    verdict = "ok" if value <= target else "MISSES"
    print(f"{name:<60} {value:>9.2f} {unit:<3} target <= {target:g} {unit}  {verdict}")


def write_jsonl(path: Path, n: int) -> Path:
    """The Azure trace replayed (`traffic.looped`) until it holds `n` requests, as JSON Lines."""
    with path.open("w") as f:
        for _, a in zip(range(n), looped(read_trace(str(AZURE)))):
            f.write(
                json.dumps(
                    {
                        "arrival_ms": a.arrival_ms,
                        "prompt_tokens": a.request.prompt_tokens,
                        "output_tokens": a.output_tokens,
                    }
                )
                + "\n"
            )
    return path


def write_azure(path: Path, n: int) -> Path:
    """`n` rows in the Azure CSV's own format (byte-order mark, 7 digits, CRLF), unsorted within each pass."""
    with AZURE.open(encoding="utf-8-sig") as f:
        rows = f.read().splitlines()[1:]
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("\ufeffTIMESTAMP,ContextTokens,GeneratedTokens\r\n")
        written, day = 0, date(2023, 11, 16)
        while written < n:
            for row in rows[: n - written]:
                out.write(row.replace("2023-11-16", day.isoformat()) + "\r\n")
            written += min(len(rows), n - written)
            day += timedelta(days=1)
    return path


Rows = list[tuple[str, str, str, float]]
# Each case: the trace it reads (made in a temporary folder) and the figures printed with their targets.
CASES: dict[str, tuple[Callable[[Path], Path], Rows]] = {
    "simulate": (
        lambda tmp: write_jsonl(tmp / "azure-20k.jsonl", 20_000),
        [
            ("simulate: 20,000-request trace, cost and rule: CPU, whole process", "process", "s", 5),
            ("    the run alone (after reading the trace)", "work", "s", 5),
            ("    peak memory", "mb", "MB", 200),
        ],
    ),
    # Vidur 0.0.26, the simulator behind the profiles, measured on this trace (bench/vidur_compare.py):
    # 7.2-10.5 CPU-s (whole process) and 354-444 MB a run, its forests cached (trained once: ~1,220
    # CPU-s); keep 10x ahead.
    "vidur": (
        lambda tmp: AZURE,
        [
            ("simulate: the 8,819-request trace, one policy: CPU of the run (Vidur 7.2-10.5)", "work", "s", 0.5),
            ("    CPU, whole process", "process", "s", 0.5),
            ("    peak memory (Vidur 354-444)", "mb", "MB", 100),
        ],
    ),
    "capacity": (
        lambda tmp: AZURE,
        [("capacity: 8 rates x 2 policies on the 8,819-request trace: CPU", "process", "s", 30)],
    ),
    "million": (
        lambda tmp: write_azure(tmp / "azure-1m.csv", 1_000_000),
        [
            ("trace: parse and summarise 1,000,000 Azure CSV rows: CPU", "process", "s", 20),
            ("    peak memory", "mb", "MB", 250),
        ],
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=sorted(BODIES))
    only = parser.parse_args().only
    tmp = Path(tempfile.mkdtemp(prefix="traffic-bench-"))
    print(f"one core per run; load average {os.getloadavg()[0]:.1f} (a shared machine reads slower)")
    for kind, (trace, rows) in CASES.items():
        if only in (None, kind):
            show(kind, trace(tmp), rows)


if __name__ == "__main__":
    main()
