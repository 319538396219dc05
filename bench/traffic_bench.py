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


def measured(kind: str, path: Path) -> tuple[float, float, float, float]:
    """(wall s, CPU s of the work, CPU s of the whole process, peak MB) of one child doing `kind`."""
    code = CHILD.format(root=str(ROOT), body=BODIES[kind].format(path=str(path)))
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - start
    figures = json.loads(out.splitlines()[-1])
    return wall, figures["work"], figures["process"], figures["mb"]


def report(name: str, value: float, unit: str, target: float) -> None:
    verdict = "ok" if value <= target else "MISSES"
    print(f"{name:<60} {value:>9.2f} {unit:<3} target <= {target:g} {unit}  {verdict}")


def write_jsonl(path: Path, n: int) -> None:
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


def write_azure(path: Path, n: int) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=sorted(BODIES))
    only = parser.parse_args().only
    tmp = Path(tempfile.mkdtemp(prefix="traffic-bench-"))
    print(f"one core per run; load average {os.getloadavg()[0]:.1f} (a shared machine reads slower)")
    if only in (None, "simulate"):
        trace = tmp / "azure-20k.jsonl"
        write_jsonl(trace, 20_000)
        wall, work, process, mb = measured("simulate", trace)
        report("simulate: 20,000-request trace, cost and rule: CPU, whole process", process, "s", 5)
        report("    the run alone (after reading the trace)", work, "s", 5)
        report("    peak memory", mb, "MB", 200)
        print(f"    (wall {wall:.2f} s on this machine)")
    if only in (None, "vidur"):
        wall, work, process, mb = measured("vidur", AZURE)
        # Vidur, the simulator behind the profiles: ~5 CPU-s and 1 GB per policy on this trace; keep 10x ahead.
        report("simulate: the 8,819-request trace, one policy: CPU of the run (Vidur ~5)", work, "s", 0.5)
        report("    CPU, whole process", process, "s", 0.5)
        report("    peak memory (Vidur ~1,000)", mb, "MB", 100)
    if only in (None, "capacity"):
        wall, work, process, mb = measured("capacity", AZURE)
        report("capacity: 8 rates x 2 policies on the 8,819-request trace: CPU", process, "s", 30)
        print(f"    (wall {wall:.2f} s on this machine; peak memory {mb:.0f} MB)")
    if only in (None, "million"):
        big = tmp / "azure-1m.csv"
        write_azure(big, 1_000_000)
        wall, work, process, mb = measured("million", big)
        report("trace: parse and summarise 1,000,000 Azure CSV rows: CPU", process, "s", 20)
        report("    peak memory", mb, "MB", 250)


if __name__ == "__main__":
    main()
