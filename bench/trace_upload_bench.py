"""Peak memory of one trace upload's parse, the part `heliosweb.traces.services` runs one at a
time per process (`_PARSING`): the shared Azure trace cycled to SIZE MiB, read line by line from
a file as an upload is (Django spools uploads over 2.5 MB to a temporary file), parsed,
summarised and packed, in a fresh process. Prints the process's memory before and its peak
during the parse; the difference is what one upload adds to a web process at most, and, with
the lock, what any number of concurrent uploads add. A figure, not an assert.

    python3 bench/trace_upload_bench.py [--mib 50] [--format azure-csv|jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AZURE = ROOT / "tests" / "data" / "traces" / "azure-llm-2023-code.csv"

CHILD = """
import json, resource, sys
sys.path.insert(0, {root!r})
import django
django.setup()
from scheduler_core.traffic import parse_trace, summarise_trace
from heliosweb.traces import codec
from heliosweb.traces.services import _lines

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

before = rss_mb()
with open({path!r}, "rb") as stream:
    trace = parse_trace(_lines(stream), name="bench", field="file")
summary = summarise_trace(trace)
packed, shapes = codec.pack(trace)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"before_mb": before, "peak_mb": peak, "requests": len(trace), "packed_mb": len(packed) / 2**20}}))
"""


def write_trace(path: Path, mib: int, fmt: str) -> int:
    """The shared trace's rows, cycled (each cycle a day later) until `mib` MiB; the bytes written."""
    header, *rows = AZURE.read_text().splitlines()
    target, size, cycle = mib * 2**20, 0, 0
    with path.open("w") as out:
        if fmt == "azure-csv":
            out.write(header + "\n")
        while size < target:
            for row in rows:
                stamp, prompt, output = row.split(",")
                when = datetime.fromisoformat(stamp[:26]) + timedelta(days=cycle)
                if fmt == "azure-csv":
                    line = f"{when.isoformat(sep=' ')},{prompt},{output}\n"
                else:
                    ms = (when - datetime(2023, 11, 16)).total_seconds() * 1000
                    line = (
                        json.dumps({"arrival_ms": ms, "prompt_tokens": int(prompt), "output_tokens": int(output)})
                        + "\n"
                    )
                out.write(line)
                size += len(line)
                if size >= target:
                    break
            cycle += 1
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=50)
    parser.add_argument("--format", choices=["azure-csv", "jsonl"], default="azure-csv")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"trace.{'csv' if args.format == 'azure-csv' else 'jsonl'}"
        size = write_trace(path, args.mib, args.format)
        child = CHILD.format(root=str(ROOT), path=str(path))
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "heliosweb.settings"}
        done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=False, env=env)
        if done.returncode:
            sys.exit(done.stderr)
    figures = json.loads(done.stdout)
    added = figures["peak_mb"] - figures["before_mb"]
    print(
        f"trace upload parse, {args.format}, {size / 2**20:.1f} MiB, {figures['requests']:,} requests: "
        f"process {figures['before_mb']:.0f} MB before, peak {figures['peak_mb']:.0f} MB: +{added:.0f} MB "
        f"({added * 2**20 / figures['requests']:.0f} bytes a request); packed {figures['packed_mb']:.1f} MB"
    )


if __name__ == "__main__":
    main()
