"""The CUDA path end to end, as one JSON report and a table: a capture of `small` (3 boots, each a
fresh process), the pr22 arms' real TTFT under both policies next to the harness's prediction (a
clean and a drifted boot), numerics in bf16 (small) and fp32 (tiny), the attention kernel used,
the benchmark targets, and the CUDA-marked tests. Run by `scripts/gpu-check [REPORT.json]`.

A step that fails does not stop the others: the steps that need its result are reported
"skipped: needs <step>", the rest run, the report is written after every step, and the exit status
is 1 (2 without a CUDA device, when every step is skipped; 0 when all passed). Steps not started
within the time budget are skipped, and a step still running at the hard limit is stopped there (the
report written, the process ended), so the whole command stays under 8 minutes. After the lines, a
table of the figures: each TTFT arm against its prediction, the numerics bound, the targets.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler_core.analyses.params import ignore_events

from .analyses import ANALYSES

BUDGET_S = 300.0  # steps start only within it (on an H200 the whole check is estimated at 2-4 minutes)
DEADLINE_S = 470.0  # the hard limit: a step still running then is stopped and the check ends (8 minutes: 480 s)
CUDA_TESTS_TIMEOUT_S = 150  # BUDGET_S + this < DEADLINE_S: pytest's child always ends before the check does
ARMS = [3504, 14000]  # the pull request's 3.5k and 14k arms
ROOT = Path(__file__).resolve().parent.parent
Results = dict[str, Any]


class StepFailed(RuntimeError):
    """A step ran to the end but its result is a failure (numerics verdicts, CUDA tests)."""


Row = tuple[str, str, str, str]  # figure, measured, compared with, verdict


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[Results], Any]  # given the results of the steps before it
    summary: Callable[[Any], str]
    needs: tuple[str, ...] = ()
    rows: Callable[[Any], list[Row]] = lambda result: []  # its figures in the final table


def _run(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    analysis = ANALYSES[kind]
    return analysis.run(analysis.validate({"preset": "small", "device": "cuda", **params}), ignore_events)


def _capture(_: Results) -> dict[str, Any]:
    return _run("capture", {"repeats": 20, "boots": 3})


def _capture_summary(result: dict[str, Any]) -> str:
    from .targets import boot_seconds, spreads

    p = result["provenance"]
    worst = max(r["p90_over_p10"] for r in spreads(result))
    return (
        f"{len(result['boots'])} boots (pids {', '.join(str(b['provenance']['pid']) for b in result['boots'])}), "
        f"{len(result['catalog'])} graphs, attention {p['attention']['observed']}; worst p90/p10 {worst:.3f}, "
        f"slowest boot {max(boot_seconds(result)):.1f} s"
    )


def _capture_rows(result: dict[str, Any]) -> list[Row]:
    boots = result.get("boots", [result])
    pinned = {b["provenance"]["attention"]["pinned"] for b in boots}
    observed = {", ".join(b["provenance"]["attention"]["observed"]) for b in boots}
    pids = [b["provenance"]["pid"] for b in boots]
    return [
        ("attention kernel run", " / ".join(sorted(observed)), f"pinned {' / '.join(sorted(pinned))}", ""),
        (
            "boots",
            f"{len(boots)}",
            f"pids {', '.join(map(str, pids))}",
            "" if len(set(pids)) == len(pids) else "ONE PROCESS",
        ),
    ]


def _ttft(params: dict[str, Any]) -> list[dict[str, Any]]:
    result = _run("ttft", {"prompt_tokens": ARMS, "runs": 5, **params})
    keys = ("prompt_tokens", "policy", "launch_count", "graphs", "ttft_ms", "launch_sum_ms", "predicted_ms", "table_ms")
    return [
        {**{k: arm[k] for k in keys}, "error_pct": 100.0 * (arm["ttft_ms"] - arm["predicted_ms"]) / arm["predicted_ms"]}
        for arm in result["arms"]
    ]


def _ttft_summary(arms: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{a['prompt_tokens']} {a['policy']} {a['ttft_ms']:.1f} ms vs predicted {a['predicted_ms']:.1f} ({a['error_pct']:+.1f}%)"
        for a in arms
    )


def _ttft_rows(arms: list[dict[str, Any]]) -> list[Row]:
    return [
        (
            f"TTFT {a['prompt_tokens']} tokens {a['policy']}",
            f"{a['ttft_ms']:.2f} ms",
            f"predicted {a['predicted_ms']:.2f} ms",
            f"{a['error_pct']:+.1f}%",
        )
        for a in arms
    ]


def _numerics(params: dict[str, Any]) -> dict[str, Any]:
    result = _run("numerics", {"prompt_tokens": ARMS[0], **params})
    if not result["ok"]:
        failed = {
            name: c["verdict"]
            for name, c in [
                *((f"{p} vs one-shot", c) for p, c in result["vs_one_shot"].items()),
                ("cost vs rule", result["cost_vs_rule"]),
                *((f"{p} twice", c) for p, c in result["same_chunking_twice"].items()),
            ]
            if c["verdict"] not in ("bitwise identical", "within tolerance")
        }
        raise StepFailed(f"numerics verdicts: {failed} (tolerance {result['tolerance']})")
    return result


def _numerics_summary(result: dict[str, Any]) -> str:
    worst = max(c["max_rel_diff"] for c in [*result["vs_one_shot"].values(), result["cost_vs_rule"]])
    return (
        f"{result['tolerance']['dtype']}: all verdicts pass, worst relative diff {worst:.2g} "
        f"(bound {result['tolerance']['max_rel_diff']:g}), same chunking twice bitwise identical"
    )


def _numerics_rows(result: dict[str, Any]) -> list[Row]:
    worst = max(c["max_rel_diff"] for c in [*result["vs_one_shot"].values(), result["cost_vs_rule"]])
    t = result["tolerance"]
    return [
        (f"{t['dtype']} worst |diff| / max |logit|", f"{worst:.2g}", f"<= {t['max_rel_diff']:g}", "pass"),
        (f"{t['dtype']} same chunking twice", "bitwise identical", "bitwise required", "pass"),
    ]


def _targets(done: Results) -> dict[str, Any]:
    from .presets import default_shapes
    from .targets import replay_vs_eager, verdicts

    launches = replay_vs_eager("small", default_shapes())
    return {"replay_vs_eager": launches, "targets": verdicts(done["capture_small"], launches)}


def _targets_summary(result: dict[str, Any]) -> str:
    return "; ".join(f"{t['target']}: {'met' if t['met'] else 'MISSED'}" for t in result["targets"].values())


def _targets_rows(result: dict[str, Any]) -> list[Row]:
    t = result["targets"]
    spread, gain = t["spread"]["worst"], t["replay_faster"]["worst"]
    verdict = {True: "met", False: "MISSED"}
    return [
        (
            f"p90/p10, worst: boot {spread['boot']} {spread['prefill']}+{spread['decode']}",
            f"{spread['p90_over_p10']:.3f}",
            t["spread"]["target"],
            verdict[t["spread"]["met"]],
        ),
        (
            f"eager / replay, least: {gain['prefill']}+{gain['decode']}",
            f"{gain['eager_over_replay']:.2f}x",
            t["replay_faster"]["target"],
            verdict[t["replay_faster"]["met"]],
        ),
        (
            "slowest boot",
            f"{t['boot_time']['worst_s']:.1f} s",
            t["boot_time"]["target"],
            verdict[t["boot_time"]["met"]],
        ),
    ]


def _cuda_tests(_: Results) -> dict[str, Any]:
    if importlib.util.find_spec("pytest") is None:
        raise StepFailed(f"pytest is not installed for {sys.executable}: `{sys.executable} -m pip install pytest`")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "tests/gpu_runner"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CUDA_TESTS_TIMEOUT_S,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0:
        raise StepFailed("\n".join(lines[-30:]))
    return {"summary": lines[-1] if lines else ""}


def steps() -> list[Step]:
    """In order; later steps plan with the first capture's catalog, as an engine would after booting."""
    return [
        Step("capture_small", _capture, _capture_summary, rows=_capture_rows),
        Step(
            "ttft_clean",
            lambda done: _ttft({"boot_catalog": done["capture_small"]["catalog"]}),
            _ttft_summary,
            needs=("capture_small",),
            rows=_ttft_rows,
        ),
        Step(
            "ttft_drift_4096",
            lambda _: _ttft({"drift_capacities": [4096], "drift_load": 4}),
            _ttft_summary,
            rows=_ttft_rows,
        ),
        Step(
            "numerics_bf16",
            lambda done: _numerics({"boot_catalog": done["capture_small"]["catalog"]}),
            _numerics_summary,
            needs=("capture_small",),
            rows=_numerics_rows,
        ),
        Step("numerics_fp32", lambda _: _numerics({"preset": "tiny"}), _numerics_summary, rows=_numerics_rows),
        Step("targets", _targets, _targets_summary, needs=("capture_small",), rows=_targets_rows),
        Step("cuda_tests", _cuda_tests, lambda r: r["summary"]),
    ]


def run_check(
    path: Path, header: dict[str, Any], plan: list[Step], budget_s: float = BUDGET_S, deadline_s: float = DEADLINE_S
) -> int:
    """Run the steps, each reported as ok, failed or skipped with a one-line summary, the report
    rewritten after each, then the table; 0 when every step passed, else 1. At `deadline_s` a step
    still running is stopped: the report and the table are finished and the process exits."""
    check = _Check(path, {**header, "steps": {}}, plan)
    watchdog = threading.Timer(deadline_s, check.stop, args=(deadline_s,))
    watchdog.daemon = True
    watchdog.start()
    try:
        for step in plan:
            check.run(step, budget_s)
        return check.finish()
    finally:
        watchdog.cancel()


class _Check:
    """One run of the check: its report, written after each step; a lock, since the hard limit's
    thread may finish it while a step runs."""

    def __init__(self, path: Path, report: dict[str, Any], plan: list[Step]) -> None:
        self.path, self.report, self.plan = path, report, plan
        self.began = time.perf_counter()
        self.results: Results = {}
        self.running: tuple[str, float] | None = None  # the step under way and when it began
        self.lock = threading.Lock()
        self.finished = False

    def run(self, step: Step, budget_s: float) -> None:
        missing = [n for n in step.needs if n not in self.results]
        start = time.perf_counter()
        entry: dict[str, Any]
        if missing:
            entry = {"status": "skipped", "line": f"skipped: needs {', '.join(missing)}"}
        elif start - self.began > budget_s:
            entry = {"status": "skipped", "line": f"skipped: time budget of {budget_s:.0f} s spent"}
        else:
            self.running = (step.name, start)
            try:
                result = step.run(self.results)
                entry = {"status": "ok", "line": step.summary(result), "result": result}
            except Exception as exc:
                entry = {
                    "status": "failed",
                    "line": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                    "error": traceback.format_exc(limit=8),
                }
        with self.lock:
            self.running = None
            if entry["status"] == "ok":
                self.results[step.name] = entry["result"]
            self._record(step.name, entry, start)

    def stop(self, deadline_s: float) -> None:
        """The hard limit: the running step failed, the rest skipped, the report finished; then exit,
        as a step may be stuck in a call that never returns (boot processes exit as their stdin closes)."""
        with self.lock:
            if self.finished:
                return
            for step in self.plan:
                if step.name in self.report["steps"]:
                    continue
                if self.running is not None and self.running[0] == step.name:
                    entry = {
                        "status": "failed",
                        "line": f"stopped: still running at the check's {deadline_s:.0f} s limit",
                    }
                    self._record(step.name, entry, self.running[1])
                else:
                    entry = {"status": "skipped", "line": f"skipped: the check's {deadline_s:.0f} s limit was reached"}
                    self._record(step.name, entry, time.perf_counter())
            code = self._finish()
        sys.stdout.flush()
        os._exit(code)

    def finish(self) -> int:
        with self.lock:
            return self._finish()

    def _record(self, name: str, entry: dict[str, Any], start: float) -> None:
        entry["seconds"] = round(time.perf_counter() - start, 2)
        self.report["steps"][name] = entry
        _write(self.path, self.report, self.began)
        print(_line(name, entry), flush=True)

    def _finish(self) -> int:
        self.finished = True
        steps = self.report["steps"]
        self.report["ok"] = all(s["status"] == "ok" for s in steps.values())
        self.report["table"] = [
            [step.name, *row] for step in self.plan if step.name in self.results for row in _rows(step, self.results)
        ]
        _write(self.path, self.report, self.began)
        counts = {s: sum(e["status"] == s for e in steps.values()) for s in ("ok", "failed", "skipped")}
        print(
            f"gpu-check: {counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped; report {self.path}"
        )
        for line in table(self.report["table"]):
            print(line)
        sys.stdout.flush()
        return 0 if self.report["ok"] else 1


def _rows(step: Step, results: Results) -> list[Row]:
    """A step's figures; a result they cannot be read from (code never run on a GPU before) costs
    its rows, not the end of the check."""
    try:
        return step.rows(results[step.name])
    except Exception as exc:
        return [("no figures", f"{type(exc).__name__}: {exc}", "", "")]


def table(rows: list[list[str]]) -> list[str]:
    """The figures of the steps that passed, aligned: step, figure, measured, compared with, verdict."""
    if not rows:
        return []
    head = ["step", "figure", "measured", "against", "verdict"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    return [
        f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:<{widths[3]}}  {r[4]}".rstrip()
        for r in [head, *rows]
    ]


def _line(name: str, entry: dict[str, Any]) -> str:
    return f"{name:<16} {entry['status']:<8} {entry['seconds']:>7.1f} s  {entry['line']}"


def _write(path: Path, report: dict[str, Any], began: float) -> None:
    report["seconds"] = round(time.perf_counter() - began, 2)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str))


def main(argv: list[str]) -> int:
    import torch

    path = Path(argv[0]) if argv else Path(os.environ.get("OUT", ".")) / "gpu-check.json"
    header = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": None}
    if not torch.cuda.is_available():
        reason = (
            f"no CUDA device (torch {torch.__version__}, built with CUDA {torch.version.cuda}); "
            "this script checks the CUDA path only and ran nothing"
        )
        print(f"gpu-check: {reason}", file=sys.stderr)
        skipped = {"status": "skipped", "line": "skipped: needs a CUDA device", "seconds": 0.0}
        report: dict[str, Any] = {**header, "ok": False, "reason": reason, "steps": {}}
        for step in steps():
            report["steps"][step.name] = dict(skipped)
            print(_line(step.name, skipped))
        _write(path, report, time.perf_counter())
        print(f"gpu-check: report {path}")
        return 2
    header["device"] = torch.cuda.get_device_name()
    return run_check(path, header, steps())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
