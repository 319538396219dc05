"""What each of Helios's server overrides buys, against a stock server given the application as
Django and Channels document it (prints figures next to their targets; not a test).

One run, one after another on the same machine: `bench/engine_bench.py` (telemetry ingestion,
policy apply, N engines long-polling, N viewers of one stream against the bare fan-out) against
- helios: daphne with `heliosweb.asgi` (every override in `heliosweb.server`);
- daphne, stock: `bench/stock_asgi.py` with none (`get_asgi_application()`, `AuthMiddlewareStack`);
- uvicorn, stock: the same application under uvicorn with its standard extras (when installed);
- helios without one override: `bench/stock_asgi.py` with every override but that one.

Run: .venv/bin/python bench/server_bench.py [--batches 50] [--waiters 1000] [--viewers 1000] [--seconds 5]
     [--only helios,daphne-stock,...] [--part ingestion|apply|waiters|viewers]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OVERRIDES = ("handler", "loop", "sockets", "tuning", "gc")
STOCK = "bench.stock_asgi:application"


def variants() -> dict[str, tuple[str, str, str]]:
    """label -> (server, application, HELIOS_BENCH_OVERRIDES)."""
    found = {"helios": ("daphne", "heliosweb.asgi:application", ""), "daphne-stock": ("daphne", STOCK, "")}
    if importlib.util.find_spec("uvicorn") is not None:
        found["uvicorn-stock"] = ("uvicorn", STOCK, "")
    for left_out in OVERRIDES:
        found[f"helios-without-{left_out}"] = ("daphne", STOCK, ",".join(o for o in OVERRIDES if o != left_out))
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--waiters", default="1000")
    parser.add_argument("--viewers", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--only", help="comma-separated labels")
    parser.add_argument(
        "--part", choices=("ingestion", "apply", "waiters", "viewers"), help="one part of engine_bench only"
    )
    args = parser.parse_args()
    chosen = variants()
    if args.only:
        unknown = sorted(set(args.only.split(",")) - set(chosen))
        if unknown:
            parser.error(f"--only: unknown {', '.join(unknown)}; known: {', '.join(chosen)}")
        chosen = {label: chosen[label] for label in args.only.split(",")}
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; sizes: {args.batches} batches of 1,000 "
        f"records, {args.waiters} long-polling engines, {args.viewers} viewers for {args.seconds:g} s",
        flush=True,
    )
    for label, (server, application, overrides) in chosen.items():
        cmd = [
            sys.executable,
            str(ROOT / "bench" / "engine_bench.py"),
            "--server",
            server,
            "--application",
            application,
            "--batches",
            str(args.batches),
            "--waiters",
            args.waiters,
            "--viewers",
            str(args.viewers),
            "--seconds",
            str(args.seconds),
            "--applies",
            "5",
            *(["--only", args.part] if args.part else []),
        ]
        env = dict(os.environ, HELIOS_BENCH_OVERRIDES=overrides)
        print(f"\n== {label}: {server} {application} overrides [{overrides}]", flush=True)
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if not line.startswith("AXES")]
        print("\n".join(lines) or done.stderr[-2000:], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
