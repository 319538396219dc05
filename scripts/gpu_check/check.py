"""The CUDA path end to end, as one JSON report and a table, in two passes so that a short budget
degrades the report instead of emptying it: the first pass runs everything once (a one-boot capture
of `GPU_CHECK_PRESET`, the pr22 arms' real TTFT, numerics in bf16 and fp32, the benchmark targets),
the second only what its estimate says fits the budget left (more boots, the plans against their
spread, a drifted TTFT, the CUDA-marked tests). Run by `scripts/gpu-check [--dry-run] [REPORT.json]`;
`--dry-run` runs every step on CPU with tiny (`budget.DRY`), to check the check itself.

Each step says its estimate (time, and memory against what is free) before it starts. A failed step
does not stop the others (those needing its result are "skipped: needs <step>"), the report is
rewritten after every step so a killed run still leaves one, and a step still running at the hard
limit is stopped there, so the whole command stays under 8 minutes. Exit status: 0 when all passed,
1 otherwise, 2 without a CUDA device. `docs/gpu_runner.md` lists the steps and the report's fields.
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

from gpu_runner.analyses import ANALYSES
from gpu_runner.presets import PRESETS
from gpu_runner.published import span
from gpu_runner.results import CaptureResult, boots_of
from scheduler_core.analyses.contract import ignore_events
from scheduler_core.policies import PR22_POLICIES

from . import budget
from .budget import DRY, Profile, gpu_profile

# The second pass's steps start only when their estimate fits what is left of it (on an H200 the
# whole check is estimated at 4-6 minutes); the first pass's always start.
BUDGET_S = 300.0
DEADLINE_S = 470.0  # the hard limit: a step still running then is stopped and the check ends (8 minutes: 480 s)
# scripts/gpu-run shares its 8 minutes with other work: it sets both lower through these.
ENV_BUDGET, ENV_DEADLINE, ENV_PRESET = "GPU_CHECK_BUDGET_S", "GPU_CHECK_DEADLINE_S", "GPU_CHECK_PRESET"
CUDA_TESTS_TIMEOUT_S = 150  # BUDGET_S + this < DEADLINE_S: pytest's child always ends before the check does
CUDA_TESTS = "tests/gpu_runner/test_cuda.py"  # every test marked `cuda` (tests/gpu_runner/test_check.py keeps it so)
GIB = 2**30
GPU_CHECK_DEFAULT = "llama-2-7b"  # the preset whose published A100/H100 profiles the check is held against
ROOT = Path(__file__).resolve().parents[2]
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
    estimate: Callable[[Results], float] = lambda done: 0.0  # seconds, said before it starts
    memory: Callable[[], int] | None = None  # bytes its boot needs by estimate (None: no boot)
    extra: bool = False  # the second pass: starts only when its estimate fits the budget left


def _run(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    analysis = ANALYSES[kind]
    return analysis.run(analysis.validate(params), ignore_events)


def _capture(profile: Profile) -> dict[str, Any]:
    """The first pass's capture: one boot, in a fresh process."""
    return _run("capture", profile.params(preset=profile.preset, decode_rows=list(profile.decode_rows), boots=1))


def _more_boots(profile: Profile, capture: CaptureResult) -> CaptureResult:
    """The second pass's boots (1, 2, ...: each its own measuring order), each in a fresh process,
    joined to the first: the capture with their boot-to-boot spread."""
    from gpu_runner.analyses import fresh_boots, with_boots

    analysis = ANALYSES["capture"]
    params = analysis.validate(profile.params(preset=profile.preset, decode_rows=list(profile.decode_rows)))
    return with_boots([*boots_of(capture), *fresh_boots(params, range(1, 1 + profile.extra_boots), ignore_events)])


def _boots_summary(result: CaptureResult) -> str:
    v = result["boot_spread_verdict"]
    return (
        f"{len(boots_of(result))} boots; boot-to-boot worst x{v['worst']['max_over_min']:.3f} "
        f"({v['worst']['prefill']}+{v['worst']['decode']}) against {v['target']}"
    )


def _capture_summary(result: CaptureResult) -> str:
    from .targets import boot_seconds, spreads

    p = result["provenance"]
    worst = max(r["p90_over_p10"] for r in spreads(result))
    spread = result.get("boot_spread_verdict")
    boots = f"boot-to-boot worst x{spread['worst']['max_over_min']:.3f}; " if spread else ""
    return (
        f"{p['preset']}: {len(boots_of(result))} boots "
        f"(pids {', '.join(str(b['provenance']['pid']) for b in result.get('boots', [result]))}), "
        f"{len(result['catalog'])} graphs, attention {p['attention']['observed'] or p['attention'].get('verdict')}; worst p90/p10 {worst:.3f}, "
        f"{boots}slowest boot {max(boot_seconds(result)):.1f} s"
    )


def _verdict(met: bool | None) -> str:
    return "" if met is None else "met" if met else "MISSED"


def _capture_rows(result: CaptureResult) -> list[Row]:
    boots = boots_of(result)
    pinned = {b["provenance"]["attention"]["pinned"] for b in boots}
    observed = {", ".join(b["provenance"]["attention"]["observed"]) or "-" for b in boots}
    verdicts = {b["provenance"]["attention"].get("verdict", "") for b in boots}
    pids = [b["provenance"]["pid"] for b in boots]
    rows: list[Row] = [
        (
            "attention kernel run",
            " / ".join(sorted(observed)),
            f"pinned {' / '.join(sorted(pinned))}",
            " / ".join(sorted(v.split(":")[0] for v in verdicts)),
        ),
        *(
            ("key/value heads", kv, "enable_gqa where the kernel takes it", "")
            for kv in sorted({b["provenance"]["attention"].get("kv_heads", "") for b in boots} - {""})
        ),
        (
            "boots",
            f"{len(boots)}",
            f"pids {', '.join(map(str, pids))}",
            "" if len(set(pids)) == len(pids) else "ONE PROCESS",
        ),
    ]
    if "boot_spread_verdict" in result:
        v = result["boot_spread_verdict"]
        rows.append(
            (
                f"boot-to-boot max/min, worst: {v['worst']['prefill']}+{v['worst']['decode']}",
                f"{v['worst']['max_over_min']:.3f}",
                v["target"],
                _verdict(v["met"]),
            )
        )
    for r in result.get("profile", {}).get("published", []):
        for gpu in ("a100", "h100"):
            if r[gpu] is not None:
                rows.append(
                    (
                        f"prefill {r['prefill']}: ours vs {gpu} published",
                        f"{r['ours_ms']:.2f} ms",
                        f"{span(r[gpu]['published_ms'])} ms",
                        f"x{span(r[gpu]['ours_over_published'])}",
                    )
                )
    return rows


def _plans(capture: CaptureResult, arms: tuple[int, ...]) -> dict[str, Any]:
    """Each arm planned with each boot's own catalog (what an engine does after its own boot): the
    predicted cost-vs-rule gap next to the boot-to-boot spread of the predictions."""
    from scheduler_core.catalog import Catalog
    from scheduler_core.planner import plan
    from scheduler_core.request import Request

    from .targets import boot_to_boot

    catalogs = [Catalog.from_dicts(b["catalog"]) for b in boots_of(capture)]
    planned = []
    for n in arms:
        predicted = {
            policy: [sum(l.predicted_ms for l in plan(policy, c, Request(n)).launches) for c in catalogs]
            for policy in PR22_POLICIES
        }
        before, after = (predicted[p] for p in PR22_POLICIES)
        gaps = [100.0 * (r - c) / c for c, r in zip(before, after)]
        noise = max(boot_to_boot(v)["pct"] for v in predicted.values())
        planned.append(
            {
                "prompt_tokens": n,
                "predicted_ms": predicted,
                "boot_to_boot": {p: boot_to_boot(v) for p, v in predicted.items()},
                "gap_pct": gaps,
                "noise_pct": noise,
                "gap_beyond_noise": min(abs(g) for g in gaps) > 2 * noise,
            }
        )
    return {"boots": len(catalogs), "arms": planned}


def _plans_summary(result: dict[str, Any]) -> str:
    return "; ".join(
        f"{a['prompt_tokens']}: rule - cost predicted {min(a['gap_pct']):+.1f}..{max(a['gap_pct']):+.1f}% "
        f"vs boot-to-boot {a['noise_pct']:.1f}%"
        for a in result["arms"]
    )


def _plans_rows(result: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for a in result["arms"]:
        n = a["prompt_tokens"]
        rows.append(
            (
                f"{n}: rule - cost, predicted ({result['boots']} boots' catalogs)",
                f"{min(a['gap_pct']):+.1f}..{max(a['gap_pct']):+.1f}%",
                f"boot-to-boot noise {a['noise_pct']:.2f}% (x2)",
                "beyond noise" if a["gap_beyond_noise"] else "WITHIN NOISE",
            )
        )
        for policy, b in a["boot_to_boot"].items():
            rows.append(
                (f"{n} {policy}: predicted TTFT boot to boot", f"{b['pct']:.2f}%", b["bound"], _verdict(b["met"]))
            )
    return rows


def _ttft(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Each arm's TTFT beside its prediction, the error split by source, and its launch sequence as
    it ran (`sequence`: device time of the whole, the launches, the copies, the device idle)."""
    result = _run("ttft", params)
    sequences = result.get("sequences") or [None] * len(result["arms"])
    keys = (
        "prompt_tokens",
        "policy",
        "launch_count",
        "graphs",
        "ttft_ms",
        "launch_sum_ms",
        "alone_ms",
        "predicted_ms",
        "table_ms",
        "errors",
    )
    return [
        {
            **{k: arm[k] for k in keys},
            "error_pct": 100.0 * (arm["ttft_ms"] - arm["predicted_ms"]) / arm["predicted_ms"],
            "sequence": sequence,
        }
        for arm, sequence in zip(result["arms"], sequences)
    ]


def _ttft_summary(arms: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{a['prompt_tokens']} {a['policy']} {a['ttft_ms']:.1f} ms vs predicted {a['predicted_ms']:.1f} ({a['error_pct']:+.1f}%)"
        for a in arms
    )


def _ttft_rows(arms: list[dict[str, Any]]) -> list[Row]:
    rows: list[Row] = []
    for a in arms:
        name = f"{a['prompt_tokens']} {a['policy']}"
        rows.append(
            (
                f"TTFT {name}",
                f"{a['ttft_ms']:.2f} ms",
                f"predicted {a['predicted_ms']:.2f} ms",
                f"{a['error_pct']:+.1f}%",
            )
        )
        q = a.get("sequence")
        if q:
            rows.append(
                (
                    f"  {name}: launch sequence as run",
                    f"{q['sequence_ms']:.2f} ms",
                    f"launches {q['launches_ms']:.2f} + copies {q['copies_ms']:.2f} + idle {q['device_idle_ms']:.2f}",
                    "",
                )
            )
        for e in a.get("errors", []):
            rows.append(
                (
                    f"  {name}: {e['source']}",
                    f"{e['ms']:+.2f} ms ({e['pct']:+.1f}%)",
                    e["bound"] or e["note"],
                    _verdict(e.get("met")),
                )
            )
    return rows


def _numerics(params: dict[str, Any]) -> dict[str, Any]:
    result = _run("numerics", params)
    if not result["ok"]:
        failed = {
            name: c["verdict"]
            for name, c in [
                *((f"{p} vs one-shot", c) for p, c in result["vs_one_shot"].items()),
                *((f"{p} KV cache vs one-shot", c) for p, c in result.get("kv_vs_one_shot", {}).items()),
                *((f"{p} causality", c) for p, c in result.get("causality", {}).items()),
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
    rows: list[Row] = [
        (f"{t['dtype']} worst |diff| / max |logit|", f"{worst:.2g}", f"<= {t['max_rel_diff']:g}", "pass"),
        (f"{t['dtype']} same chunking twice", "bitwise identical", "bitwise required", "pass"),
    ]
    caches = result.get("kv_vs_one_shot", {})
    if caches:
        c = max(caches.values(), key=lambda c: c["max_rel_diff"])
        rows.append(
            (
                f"{t['dtype']} KV cache, worst layer {c['worst_layer']}",
                f"{c['max_rel_diff']:.2g}",
                f"<= {t['cache_rel_diff']:g} of the layer's max",
                "pass",
            )
        )
    if result.get("causality"):
        rows.append((f"{t['dtype']} causality probe", "bitwise identical", "bitwise required", "pass"))
    return rows


def _targets(profile: Profile, done: Results) -> dict[str, Any]:
    from . import targets

    speedups = targets.replay_vs_eager(profile.preset, profile.shapes(), device=profile.device)
    return {"replay_vs_eager": speedups, "targets": targets.verdicts(done["capture"], speedups)}


def _targets_summary(result: dict[str, Any]) -> str:
    return "; ".join(f"{t['target']}: {_verdict(t['met'])}" for t in result["targets"].values())


def _targets_rows(result: dict[str, Any]) -> list[Row]:
    t = result["targets"]
    spread = t["spread"]["worst"]
    replay = [
        (
            f"eager / replay, least: {t[name]['worst']['prefill']}+{t[name]['worst']['decode']}",
            f"{t[name]['worst']['eager_over_replay']:.2f}x",
            t[name]["target"].split(" (")[0],
            _verdict(t[name]["met"]),
        )
        for name in ("replay_faster", "replay_no_slower")
        if name in t
    ]
    return [
        (
            f"p90/p10, worst: boot {spread['boot']} {spread['prefill']}+{spread['decode']}",
            f"{spread['p90_over_p10']:.3f}",
            t["spread"]["target"],
            _verdict(t["spread"]["met"]),
        ),
        *replay,
        (
            "slowest boot",
            f"{t['boot_time']['worst_s']:.1f} s",
            t["boot_time"]["target"],
            _verdict(t["boot_time"]["met"]),
        ),
    ]


def _cuda_tests(_: Results) -> dict[str, Any]:
    if importlib.util.find_spec("pytest") is None:
        raise StepFailed(f"pytest is not installed for {sys.executable}: `{sys.executable} -m pip install pytest`")
    out = subprocess.run(
        # without the web's pytest-django where it is installed: these tests need no settings
        [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "-p", "no:django", CUDA_TESTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CUDA_TESTS_TIMEOUT_S,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0:
        raise StepFailed("\n".join([*lines, *out.stderr.strip().splitlines()][-30:]) or f"pytest exit {out.returncode}")
    return {"summary": lines[-1] if lines else ""}  # on CPU (the dry run) they are all skipped, so said


def steps(profile: Profile | str = GPU_CHECK_DEFAULT) -> list[Step]:
    """The first pass, then the second (`extra`: only when its estimate fits the budget left); the
    TTFT steps plan with their own boot's catalog, as an engine would after booting. `profile`: a
    preset name means that preset on a GPU."""
    p = gpu_profile(profile) if isinstance(profile, str) else profile
    arms = list(p.arms)
    boots = lambda done: done.get("boots", done["capture"])  # every boot measured so far
    return [
        Step(
            "capture",
            lambda _: _capture(p),
            _capture_summary,
            rows=_capture_rows,
            estimate=lambda done: budget.boot_s(p, done),
            memory=lambda: budget.memory_bytes(p),
        ),
        Step(
            "ttft_clean",
            lambda _: _ttft(p.params(preset=p.preset, prompt_tokens=arms, runs=p.ttft_runs)),
            _ttft_summary,
            rows=_ttft_rows,
            estimate=lambda done: budget.ttft(p, done, p.ttft_runs),
            memory=lambda: budget.memory_bytes(p, prefill_only=True),
        ),
        Step(
            "numerics",
            lambda done: _numerics(
                p.params(preset=p.preset, prompt_tokens=arms[0], boot_catalog=done["capture"]["catalog"])
            ),
            _numerics_summary,
            needs=("capture",),
            rows=_numerics_rows,
            estimate=lambda done: budget.numerics(p, done),
            memory=lambda: budget.memory_bytes(p, prefill_only=True),
        ),
        Step(
            "numerics_fp32",
            lambda _: _numerics(p.params(preset="tiny", prompt_tokens=min(arms[0], PRESETS["tiny"].context_tokens))),
            _numerics_summary,
            rows=_numerics_rows,
            estimate=lambda done: p.fp32_prior_s,
            memory=lambda: budget.memory_bytes(p, preset="tiny", prefill_only=True),
        ),
        Step(
            "targets",
            lambda done: _targets(p, done),
            _targets_summary,
            needs=("capture",),
            rows=_targets_rows,
            estimate=lambda done: budget.targets(p, done),
            memory=lambda: budget.memory_bytes(p),
        ),
        Step(
            "boots",
            lambda done: _more_boots(p, done["capture"]),
            _boots_summary,
            needs=("capture",),
            rows=_capture_rows,
            estimate=lambda done: p.extra_boots * budget.boot_s(p, done),
            memory=lambda: budget.memory_bytes(p),
            extra=True,
        ),
        Step(
            "plans",
            lambda done: _plans(boots(done), p.arms),
            _plans_summary,
            needs=("capture",),
            rows=_plans_rows,
            extra=True,
        ),
        Step(
            f"ttft_drift_{p.drift_capacity}",
            lambda _: _ttft(
                p.params(
                    preset=p.preset,
                    prompt_tokens=arms,
                    runs=p.drift_runs,
                    drift_capacities=[p.drift_capacity],
                    drift_load=4,
                )
            ),
            _ttft_summary,
            rows=_ttft_rows,
            estimate=lambda done: budget.ttft(p, done, p.drift_runs),
            memory=lambda: budget.memory_bytes(p, prefill_only=True),
            extra=True,
        ),
        Step("cuda_tests", _cuda_tests, lambda r: r["summary"], estimate=lambda done: p.tests_prior_s, extra=True),
    ]


def run_check(
    path: Path,
    header: dict[str, Any],
    plan: list[Step],
    budget_s: float = BUDGET_S,
    deadline_s: float = DEADLINE_S,
    free_bytes: Callable[[], int] | None = None,
) -> int:
    """Run the steps, each reported as ok, failed or skipped with a one-line summary, the report
    rewritten after each, then the table; 0 when every step passed, else 1. `free_bytes`: the
    memory free where the steps boot, checked against each one's estimate before it starts (None:
    not checked). At `deadline_s` a step still running is stopped: the report and the table are
    finished and the process exits."""
    check = _Check(path, {**header, "budget": {"budget_s": budget_s, "deadline_s": deadline_s}, "steps": {}}, plan)
    watchdog = threading.Timer(deadline_s, check.stop, args=(deadline_s,))
    watchdog.daemon = True
    watchdog.start()
    try:
        for step in plan:
            check.run(step, budget_s, free_bytes)
        return check.finish()
    finally:
        watchdog.cancel()


def _estimate(step: Step, results: Results) -> float | None:
    """A step's estimate in seconds; None where results it reads cannot give one (never fatal)."""
    try:
        return float(step.estimate(results))
    except Exception:
        return None


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

    def run(self, step: Step, budget_s: float, free_bytes: Callable[[], int] | None = None) -> None:
        missing = [n for n in step.needs if n not in self.results]
        start = time.perf_counter()
        spent = start - self.began
        estimate = None if missing else _estimate(step, self.results)
        need = step.memory() if step.memory is not None and not missing else None
        free = free_bytes() if need is not None and free_bytes is not None else None
        entry: dict[str, Any]
        if missing:
            entry = {"status": "skipped", "line": f"skipped: needs {', '.join(missing)}"}
        elif step.extra and (spent + (estimate or 0.0) > budget_s):
            said = "unknown" if estimate is None else f"{estimate:.0f} s"
            entry = {
                "status": "skipped",
                "line": f"skipped: estimate {said}, {max(budget_s - spent, 0.0):.0f} s of the {budget_s:.0f} s budget left",
            }
        elif need is not None and free is not None and need > free:
            entry = {
                "status": "skipped",
                "line": f"skipped: needs about {need / GIB:.1f} GiB by estimate, {free / GIB:.1f} GiB free",
            }
        else:
            print(_start_line(step, estimate, spent, budget_s, need, free), flush=True)
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
        entry.update(
            {
                "pass": "second" if step.extra else "first",
                "estimate_s": None if estimate is None else round(estimate, 1),
                "memory": None if need is None else {"need_bytes": need, "free_bytes": free},
            }
        )
        _release_device_memory()  # the next step boots a model of its own
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
        self.report["budget"]["spent_s"] = round(time.perf_counter() - self.began, 2)
        self.report["skipped"] = {n: s["line"] for n, s in steps.items() if s["status"] == "skipped"}
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


def _start_line(
    step: Step, estimate: float | None, spent: float, budget_s: float, need: int | None, free: int | None
) -> str:
    """What a step is expected to take, said before it starts."""
    said = "unknown" if estimate is None else f"{estimate:.0f} s"
    memory = (
        ""
        if need is None
        else f"; needs about {need / GIB:.1f} GiB" + ("" if free is None else f", {free / GIB:.1f} GiB free")
    )
    return (
        f"{step.name:<16} {'start':<8} {'':>9}  estimate {said}, {spent:.0f} of {budget_s:.0f} s budget spent{memory}"
    )


def _release_device_memory() -> None:
    """A finished step's boot (7B weights, caches, graph pools) freed before the next one's."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        import gc

        gc.collect()
        torch.cuda.empty_cache()


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


def settings(env: dict[str, str]) -> tuple[str, float, float]:
    """The preset, time budget and hard limit from the environment, refused (ValueError naming the
    variable) when unknown or not a number of seconds with the budget under the limit."""
    preset = env.get(ENV_PRESET) or GPU_CHECK_DEFAULT
    if preset not in PRESETS:
        raise ValueError(f"{ENV_PRESET}: unknown preset {preset!r} (expected one of {sorted(PRESETS)})")
    try:
        budget = float(env.get(ENV_BUDGET) or BUDGET_S)
        deadline = float(env.get(ENV_DEADLINE) or DEADLINE_S)
    except ValueError as exc:
        raise ValueError(f"{ENV_BUDGET}/{ENV_DEADLINE}: not a number of seconds ({exc})") from None
    if not 0 < budget < deadline <= DEADLINE_S:
        raise ValueError(f"{ENV_BUDGET}/{ENV_DEADLINE}: need 0 < budget < limit <= {DEADLINE_S:.0f} s")
    return preset, budget, deadline


def free_bytes(device_type: str) -> Callable[[], int]:
    """The memory free where the steps boot, read just before each (`device.available_bytes`)."""
    import torch

    from gpu_runner.device import available_bytes

    return lambda: available_bytes(torch.device(device_type))


def main(argv: list[str]) -> int:
    """`python -m scripts.gpu_check.check [--dry-run] [REPORT.json]`."""
    from gpu_runner.versions import refusal

    dry = "--dry-run" in argv
    argv = [a for a in argv if a != "--dry-run"]
    too_old = refusal()
    if too_old:
        print(f"gpu-check: {too_old}", file=sys.stderr)
        return 2
    try:
        preset, budget_s, deadline = settings(dict(os.environ))
    except ValueError as exc:
        print(f"gpu-check: {exc}", file=sys.stderr)
        return 2
    import torch

    path = Path(argv[0]) if argv else Path(os.environ.get("OUT", ".")) / "gpu-check.json"
    profile = DRY if dry else gpu_profile(preset)
    header = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": None,
        "preset": profile.preset,
        "dry_run": dry,
        "profile": profile.as_dict(),
    }
    if dry:
        header["device"] = f"cpu ({torch.get_num_threads()} threads): a dry run, no GPU figure"
        return run_check(path, header, steps(profile), budget_s, deadline, free_bytes("cpu"))
    if not torch.cuda.is_available():
        reason = (
            f"no CUDA device (torch {torch.__version__}, built with CUDA {torch.version.cuda}); "
            "this script checks the CUDA path only and ran nothing (--dry-run runs it on CPU)"
        )
        print(f"gpu-check: {reason}", file=sys.stderr)
        skipped = {"status": "skipped", "line": "skipped: needs a CUDA device", "seconds": 0.0}
        report: dict[str, Any] = {**header, "ok": False, "reason": reason, "steps": {}}
        for step in steps(profile):
            report["steps"][step.name] = dict(skipped)
            print(_line(step.name, skipped))
        _write(path, report, time.perf_counter())
        print(f"gpu-check: report {path}")
        return 2
    header["device"] = torch.cuda.get_device_name()
    return run_check(path, header, steps(profile), budget_s, deadline, free_bytes("cuda"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
