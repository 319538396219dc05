"""Memory and database growth of a running stack under steady traffic: MB/h per process, bytes/h of
the database, and what the database levels at under the retention settings (issue 30: "worker and
web memory flat over a soak").

`./dev up` in a throwaway var/ (its SQLite database, or DATABASE_URL's), then, for `--minutes`:
a simulated engine on each demo recipe (the `engine` worker: 20 arrivals/s each, a telemetry batch
every 500 ms), a one-event `pulse` job every 5 s (the `sim` worker), and reads paced to `--rate`
requests/s in all (job list and detail, each recipe's policy, `/metrics` every 5 s). Every 20 s the
resident memory of each program (its pool processes included) and the database's size are read.
Growth is the least-squares slope over the samples after `--warmup` minutes, in MB/h; the
database's level is computed from the bytes one stored record takes and the retention settings
(`HELIOS_TELEMETRY_RAW_HOURS`, `HELIOS_TELEMETRY_MAX_RECORDS`, `HELIOS_TELEMETRY_ROLLUP_DAYS`).

    .venv/bin/python bench/soak_bench.py --minutes 10 [--rate 50] [--port 8106]

A short sitting says less than the 2 hours the issue asks for: read the slope with its sample count.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from heliosweb import stack  # noqa: E402 (after the path)

SAMPLE_S = 20.0
RECIPES = ("llama-8b-h100", "mistral-7b-a100", "tiny-cpu")


def rss_mb(pid: int) -> float:
    """Resident memory of `pid` and its direct children (a prefork worker's pool), in MB."""
    from heliosweb.common.processes import child_pids

    total = 0
    for p in (pid, *child_pids(pid)):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        total += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return total / 1024


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value), per hour."""
    n = len(points)
    mean_t, mean_v = sum(t for t, _ in points) / n, sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return 3600 * sum((t - mean_t) * (v - mean_v) for t, v in points) / var if var else 0.0


class Stack:
    def __init__(self, var: Path, port: int) -> None:
        self.var, self.port = var, port
        self.env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE")}
        self.env.update(HELIOS_VAR_DIR=str(var), HELIOS_DEMO_PASSWORD="pw-soak-123", HELIOS_SIM_CONCURRENCY="1")
        # as deployed: with DEBUG on, Django keeps each connection's last 9,000 queries (memory that
        # grows for the first minutes of a soak, then stays)
        self.env.setdefault("HELIOS_DEBUG", "0")
        self.front: subprocess.Popen | None = None
        self.token = ""

    def start(self) -> None:
        log = (self.var.parent / "dev-up.log").open("w")
        cmd = [sys.executable, "-m", "heliosweb.devtool", "up", "--port", str(self.port)]
        self.front = subprocess.Popen(
            cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 300
        while "dev: Helios Observatory on" not in (self.var.parent / "dev-up.log").read_text():
            if time.monotonic() > deadline or self.front.poll() is not None:
                raise SystemExit(f"./dev up did not start; see {self.var.parent / 'dev-up.log'}")
            time.sleep(1)

    def manage(self, *args: str) -> str:
        env = dict(self.env, REDIS_URL=json.loads((self.var / "run" / "stack.json").read_text())["redis_url"])
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"manage.py {args[0]} failed: {done.stderr[-2000:]}")
        return done.stdout

    def request(self, path: str, body: dict | None = None) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode() if body else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def stop(self) -> None:
        if self.front is not None and self.front.poll() is None:
            self.front.send_signal(signal.SIGINT)
            try:
                self.front.wait(timeout=240)
            except subprocess.TimeoutExpired:
                os.killpg(self.front.pid, signal.SIGKILL)


def database_bytes(var: Path) -> int:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        import psycopg

        with psycopg.connect(url.replace("postgres://", "postgresql://")) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
            return int(row[0]) if row else 0
    return sum(p.stat().st_size for p in var.glob("helios.sqlite3*"))


def telemetry_rows(var: Path) -> tuple[int, int]:
    """(raw records stored, rollup rows) in the SQLite database (PostgreSQL: through manage.py)."""
    with sqlite3.connect(var / "helios.sqlite3", timeout=30) as db:
        records = db.execute(
            "SELECT COALESCE(SUM(launch_count + request_count), 0) FROM telemetry_telemetrybatch"
        ).fetchone()[0]
        rollups = db.execute("SELECT COUNT(*) FROM telemetry_rollup").fetchone()[0]
    return int(records), int(rollups)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0, help="minutes left out of the slopes")
    parser.add_argument(
        "--rate", type=float, default=50.0, help="requests per second the bench sends (engines' posts aside)"
    )
    parser.add_argument("--port", type=int, default=8106)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="helios-soak-"))
    site = Stack(tmp / "var", args.port)
    try:
        site.start()
        site.token = site.manage("create_api_token", "maintainer", "--rotate").strip().splitlines()[-1]
        starts = "; ".join(
            f"engine_start(recipe=Recipe.objects.get(name='{r}'), user=u, params={{'duration_s': {int(args.minutes * 60) + 120}}})"
            for r in RECIPES
        )
        site.manage("shell", "-c", "from django.contrib.auth.models import User; from heliosweb.recipes.models import Recipe;"
                    f" from heliosweb.simengine.services import engine_start; u = User.objects.get(username='maintainer'); {starts}")  # fmt: skip
        paths = stack.Paths(site.var)
        samples: dict[str, list[tuple[float, float]]] = {}
        db: list[tuple[float, float]] = []
        begin = time.monotonic()
        next_sample = next_pulse = next_metrics = begin
        sent = failed = 0
        reads = [*(f"/api/recipes/{r}/policy" for r in RECIPES), "/api/jobs/", "/api/jobs/1/"]
        while (now := time.monotonic()) - begin < args.minutes * 60:
            if now >= next_sample:
                for name, pid in stack.running_pids(paths).items():
                    samples.setdefault(name, []).append((now - begin, rss_mb(pid)))
                db.append((now - begin, database_bytes(site.var) / 2**20))
                next_sample += SAMPLE_S
            path = reads[sent % len(reads)]
            if now >= next_metrics:
                path, next_metrics = "/metrics", next_metrics + 5
            body = None
            if now >= next_pulse:
                path, body, next_pulse = (
                    "/api/jobs/",
                    {"kind": "pulse", "params": {"count": 1, "rate": 10.0}},
                    next_pulse + 5,
                )
            try:
                site.request(path, body)
            except OSError:
                failed += 1
            sent += 1
            time.sleep(max(0.0, begin + sent / args.rate - time.monotonic()))
        elapsed = time.monotonic() - begin
        records, rollups = telemetry_rows(site.var) if not os.environ.get("DATABASE_URL") else (0, 0)
        report(args, samples, db, elapsed, sent, failed, records, rollups)
    finally:
        site.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def report(args, samples, db, elapsed, sent, failed, records, rollups) -> None:
    warm = args.warmup * 60
    print(f"soak: {elapsed / 60:.1f} min, {sent / elapsed:.1f} requests/s sent ({failed} failed), 3 simulated engines,")
    print(
        f"a pulse job every 5 s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; slopes after {args.warmup:.0f} min"
    )
    print(f"{'process':<18}{'first MB':>9}{'last MB':>9}{'peak MB':>9}{'MB/h':>8}{'samples':>9}")
    for name, points in sorted(samples.items()):
        later = [p for p in points if p[0] >= warm] or points
        values = [v for _, v in points]
        print(
            f"{name:<18}{values[0]:>9.1f}{values[-1]:>9.1f}{max(values):>9.1f}{slope_per_hour(later):>8.1f}{len(later):>9}"
        )
    later = [p for p in db if p[0] >= warm] or db
    print(
        f"{'database':<18}{db[0][1]:>9.1f}{db[-1][1]:>9.1f}{max(v for _, v in db):>9.1f}{slope_per_hour(later):>8.1f}{len(later):>9}"
    )
    # The file's level: once the retention prune binds, the last half's slope is what it settles at
    # (SQLite reuses pruned pages and never returns them, so the file is its peak), and the size at
    # each quarter shows when it stopped growing.
    half = [p for p in db if p[0] >= db[-1][0] / 2]
    quarters = [min(db, key=lambda p, q=q: abs(p[0] - q * db[-1][0] / 4))[1] for q in (1, 2, 3, 4)]
    print(
        f"database over the last half: {slope_per_hour(half):+.1f} MB/h; MB at each quarter: {', '.join(f'{v:.1f}' for v in quarters)}"
    )
    if records:
        per_record = (db[-1][1] - db[0][1]) * 2**20 / records
        print(f"telemetry: {records:,} raw records and {rollups:,} minute rollups stored; the database grew")
        print(f"about {per_record:,.0f} bytes per raw record (rollups, jobs and their events included)")


if __name__ == "__main__":
    main()
