"""The CUDA path end to end, as one report: a boot of `small`, the pr22 arms' real TTFT under both
policies on a clean and on a drifted boot, numerics, and the CUDA-marked tests. Run by
`scripts/gpu-check [REPORT.json]` when an accelerator is lent; it refuses to run without CUDA.

Each step records ok/error and its seconds, so one failure doesn't hide the others; steps are
skipped once the budget (under the 5 minutes allowed) is spent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scheduler_core.analyses.params import ignore_events

from .analyses import ANALYSES

BUDGET_S = 240.0
ARMS = [3504, 14000]  # the pull request's 3.5k and 14k arms
ROOT = Path(__file__).resolve().parent.parent


def _run(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    analysis = ANALYSES[kind]
    return analysis.run(analysis.validate({"preset": "small", "device": "cuda", **params}), ignore_events)


def _ttft_summary(result: dict[str, Any]) -> list[dict[str, Any]]:
    keys = ("prompt_tokens", "policy", "launch_count", "graphs", "ttft_ms", "launch_sum_ms", "predicted_ms", "table_ms")
    return [{k: arm[k] for k in keys} for arm in result["arms"]]


def _cuda_tests() -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "tests/gpu_runner"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0:
        raise RuntimeError("\n".join(lines[-30:]))
    return {"summary": lines[-1] if lines else ""}


def steps(report: dict[str, Any]) -> list[tuple[str, Callable[[], Any]]]:
    """Later steps plan with the first boot's catalog, as an engine would after booting."""

    def boot() -> Any:
        result = _run("capture", {"repeats": 20})
        report["catalog"] = result["catalog"]
        return result

    catalog = lambda: report["catalog"]
    return [
        ("capture_small", boot),
        ("ttft_clean", lambda: _ttft_summary(_run("ttft", {"catalog": catalog(), "prompt_tokens": ARMS, "runs": 5}))),
        (
            "ttft_drift_4096",
            lambda: _ttft_summary(
                _run("ttft", {"drift_capacities": [4096], "drift_load": 4, "prompt_tokens": ARMS, "runs": 5})
            ),
        ),
        ("numerics", lambda: _run("numerics", {"catalog": catalog(), "prompt_tokens": ARMS[0]})),
        ("cuda_tests", _cuda_tests),
    ]


def main(argv: list[str]) -> int:
    import torch

    if not torch.cuda.is_available():
        print(
            f"gpu-check: no CUDA device (torch {torch.__version__}, CUDA {torch.version.cuda}); "
            "this script checks the CUDA path only and ran nothing",
            file=sys.stderr,
        )
        return 2
    path = Path(argv[0]) if argv else Path(os.environ.get("OUT", ".")) / "gpu-check.json"
    began = time.perf_counter()
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "steps": {},
    }
    for name, step in steps(report):
        if time.perf_counter() - began > BUDGET_S:
            report["steps"][name] = {"ok": False, "error": "skipped: time budget spent"}
            continue
        start = time.perf_counter()
        try:
            entry = {"ok": True, "result": step()}
        except Exception:
            entry = {"ok": False, "error": traceback.format_exc(limit=5)}
        entry["seconds"] = round(time.perf_counter() - start, 2)
        report["steps"][name] = entry
        print(f"gpu-check: {name}: {'ok' if entry['ok'] else 'FAILED'} ({entry['seconds']} s)", file=sys.stderr)
    report["seconds"] = round(time.perf_counter() - began, 2)
    report["ok"] = all(s["ok"] for s in report["steps"].values())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print(f"gpu-check: report written to {path}", file=sys.stderr)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
