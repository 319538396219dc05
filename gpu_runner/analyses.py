"""The GPU job kinds (`capture`, `ttft`, `numerics`) as scheduler_core analyses: declared
parameters, a work estimate, and `run(params, emit) -> dict`, so the CLI, the tests and the
dashboard's `gpu` queue drive the same code.

Importing this module never imports torch: the dashboard validates jobs without it, and a
Celery `gpu` worker initialises CUDA only inside the task (`run` imports the torch side).
"""

from __future__ import annotations

from typing import Any, cast

from scheduler_core.analyses.contract import Analysis, Emit
from scheduler_core.analyses.params import CatalogParam, ChoiceParam, IntListParam, IntParam, PolicyListParam
from scheduler_core.catalog import DEFAULT_PREFILL_CAPACITIES, Catalog
from scheduler_core.errors import InvalidInput
from scheduler_core.events import ProgressEvent
from scheduler_core.measured import TtftArm, TtftConditions, TtftLaunch
from scheduler_core.policies import PR22_ARMS

from .events import MeasurementEvent, TtftLaunchEvent
from .presets import DEFAULT_DECODE_ROWS, PRESETS, ModelConfig, default_shapes, get_preset
from .published import profile
from .report import capture_text, numerics_text, ttft_text
from .results import Boot, CaptureResult, NumericsResult, TtftResult, capture_boots
from .targets import BOOT_SPREAD_TARGET, error_split

PRESET = ChoiceParam(
    "preset",
    "tiny",
    "model size: tiny runs on CPU (float32); small, medium, llama-2-7b and llama-3-8b need a GPU (bf16)",
    choices=tuple(PRESETS),
)
DEVICE = ChoiceParam("device", "auto", "where to run: auto takes CUDA when present", choices=("auto", "cpu", "cuda"))
SEED = IntParam("seed", 0, "seed of the model's random weights and of the prompt", minimum=0, maximum=2**31 - 1)
AUTO_REPEATS = {"cuda": 20, "cpu": 5}  # a replay takes milliseconds; an eager CPU call up to a second
REPEATS = IntParam(
    "repeats",
    0,
    "timed launches per shape (median, p10 and p90 over them); 0: 20 on CUDA, 5 on CPU",
    minimum=0,
    maximum=1000,
)
CAPACITIES = IntListParam(
    "capacities",
    list(DEFAULT_PREFILL_CAPACITIES),
    "solo prefill graph capacities (tokens)",
    minimum=1,
    maximum=65536,
    max_items=16,
)
DECODE_ROWS = IntListParam(
    "decode_rows",
    list(DEFAULT_DECODE_ROWS),
    "decode row counts of decode-only and mixed graphs",
    minimum=1,
    maximum=256,
    max_items=8,
)
GRAPHS = ChoiceParam(
    "graphs",
    "all",
    "which shapes to capture: prefill only, plus decode-only, plus mixed "
    "(smallest capacity with each decode row count)",
    choices=("prefill", "prefill+decode", "all"),
)
WARMUP = IntParam(
    "warmup",
    3,
    "untimed launches of each shape before its timed ones (a graph's first replays pay for lazy set-up)",
    minimum=0,
    maximum=100,
)
BOOTS = IntParam(
    "boots", 1, "boots, each in a fresh process, to show restart-to-restart measurement noise", minimum=1, maximum=10
)
DRIFT_CAPACITIES = IntListParam(
    "drift_capacities",
    None,
    "prefill capacities timed under competing work, so the catalog over-measures them; left empty, none is",
    minimum=1,
    maximum=65536,
    max_items=16,
)
DRIFT_LOAD = IntParam(
    "drift_load",
    2,
    "how much competing work: CPU threads, or 32 large matmuls per unit on another CUDA stream",
    minimum=1,
    maximum=16,
)
CATALOG = CatalogParam(
    "boot_catalog",
    None,
    "a boot's catalog to use instead of capacities (capture: its shapes; "
    "ttft/numerics: its durations to plan with); default: this run's own capture",
    measured=False,
)
PROMPTS = IntListParam(
    "prompt_tokens",
    [PR22_ARMS["3.5k"]],
    f"prompt lengths to prefill (the pr22 arms are {' and '.join(map(str, PR22_ARMS.values()))}; tiny holds 4096 tokens, the GPU presets 16384)",
    minimum=1,
    maximum=65536,
    max_items=8,
)
PROMPT = IntParam("prompt_tokens", PR22_ARMS["3.5k"], "prompt length", minimum=1, maximum=65536)
POLICIES_PARAM = PolicyListParam("policies", help="policies whose plans are executed", every_policy=True)
RUNS = IntParam("runs", 3, "executions of each plan; TTFT is their median", minimum=1, maximum=50)
# size params first: errors name them
BOOT_PARAMS = (PRESET, DEVICE, REPEATS, WARMUP, CAPACITIES, CATALOG, DRIFT_CAPACITIES, DRIFT_LOAD, SEED)


def _capture_shapes(params: dict[str, Any]) -> tuple[list[tuple[int, int]], str]:
    """The shapes a capture boots, and the parameter that named them (for errors)."""
    if params["boot_catalog"] is not None:
        return [g.shape for g in params["boot_catalog"].graphs], "boot_catalog"
    return default_shapes(params["capacities"], params["decode_rows"], params["graphs"]), "capacities"


def _prefill_shapes(params: dict[str, Any]) -> tuple[list[tuple[int, int]], str]:
    """Plans launch solo prefill graphs only: the planning catalog's capacities."""
    if params["boot_catalog"] is not None:
        return [(c, 0) for c in params["boot_catalog"].capacities], "boot_catalog"
    return [(c, 0) for c in sorted(params["capacities"])], "capacities"


def _check(params: dict[str, Any], shapes: list[tuple[int, int]], prompts: dict[str, int]) -> None:
    """Every refusal that needs no device: a GPU preset asked to run on the CPU, drift capacities
    the boot lacks, prompts longer than the preset's context ({field: tokens})."""
    config = PRESETS[params["preset"]]
    if params["device"] == "cpu" and config.dtype != "float32":
        raise InvalidInput("preset", f"{config.name} is a GPU preset ({config.dtype}); on cpu use tiny")
    for i, capacity in enumerate(params["drift_capacities"] or ()):
        if (capacity, 0) not in shapes:
            raise InvalidInput(
                f"drift_capacities[{i}]",
                f"{capacity} is not a prefill capacity of this boot {sorted(p for p, d in shapes if d == 0)}",
            )
    for field, n in prompts.items():
        if n > config.context_tokens:
            raise InvalidInput(
                field, f"{n} tokens is longer than preset {config.name}'s context of {config.context_tokens} tokens"
            )


def check_capture(params: dict[str, Any]) -> None:
    _check(params, _capture_shapes(params)[0], {})


def check_ttft(params: dict[str, Any]) -> None:
    _check(
        params, _prefill_shapes(params)[0], {f"prompt_tokens[{i}]": n for i, n in enumerate(params["prompt_tokens"])}
    )


def check_numerics(params: dict[str, Any]) -> None:
    _check(params, _prefill_shapes(params)[0], {"prompt_tokens": params["prompt_tokens"]})


def _device(config: ModelConfig, params: dict[str, Any], shapes: list[tuple[int, int]], field: str) -> Any:
    """Resolve the device and refuse what it cannot run: all before a weight is allocated."""
    from .device import check_fits, resolve_device

    device = resolve_device(params["device"])
    if device.type != "cuda" and config.dtype != "float32":
        raise InvalidInput("preset", f"{config.name} is a GPU preset ({config.dtype}); on {device} use tiny")
    check_fits(config, shapes, device, field)
    return device


def repeats(params: dict[str, Any], device: Any = None) -> int:
    """The samples per shape: as asked, or the device's default (the larger one before a device is known)."""
    return params["repeats"] or AUTO_REPEATS["cuda" if device is None else device.type]


def boot_here(
    params: dict[str, Any], shapes: list[tuple[int, int]], field: str, steps: Any, index: int = 0
) -> tuple[Any, dict[str, Any]]:
    """A boot in this process (TTFT and numerics execute plans on it; a capture runs this in a
    fresh process per boot): the live boot and its stored form."""
    from .capture import capture_boot

    config = get_preset(params["preset"])
    device = _device(config, params, shapes, field)
    boot, stored = capture_boot(
        config,
        device,
        shapes,
        repeats=repeats(params, device),
        warmup=params["warmup"],
        seed=params["seed"],
        drift_capacities=tuple(params["drift_capacities"] or ()),
        drift_load=params["drift_load"],
        steps=steps,
        boot_index=index,
    )
    return boot, {**stored, "repeats": repeats(params, device)}


def run_capture(params: dict[str, Any], emit: Emit) -> CaptureResult:
    """Every boot in a fresh process started here (this process needs no torch and no device)."""
    return with_boots(fresh_boots(params, range(params["boots"]), emit))


def fresh_boots(params: dict[str, Any], indices: range, emit: Emit) -> list[Boot]:
    """Boots `indices` of a capture (each its own measuring order), each in a fresh process; a
    check adds boots 1.. to a first one this way when time is left."""
    from .events import Progress
    from .fresh_boot import run_fresh_boot

    shapes, field = _capture_shapes(params)
    steps = Progress(emit, len(indices) * (len(shapes) + 1))
    steps.start("booting")
    boots: list[Boot] = []
    for index in indices:
        request = {  # to the boot's process as JSON: the catalog as dicts
            "params": {**params, CATALOG.name: CATALOG.to_json(params[CATALOG.name])},
            "shapes": shapes,
            "field": field,
            "index": index,
            "progress": [steps.done, steps.total],
        }
        boots.append(cast(Boot, run_fresh_boot(request, emit)))  # JSON from the boot's process
        steps.done += len(shapes) + 1
    return boots


def with_boots(boots: list[Boot]) -> CaptureResult:
    """A capture result of these boots: the first as its profile; with several, their spread."""
    result: CaptureResult = {**boots[0], "profile": profile(boots[0])}
    if len(boots) > 1:
        result["boots"] = boots
        result["boot_spread"] = boot_spread(boots)
        result["boot_spread_verdict"] = judge_boot_spread(result["boot_spread"])
    return result


def boot_spread(boots: list[Boot]) -> list[dict[str, Any]]:
    """Per shape, the boots' medians and their max/min ratio: noise a stored catalog carries."""
    rows = []
    for i, first in enumerate(boots[0]["measurements"]):
        medians = [b["measurements"][i]["median_ms"] for b in boots]
        rows.append(
            {
                "prefill": first["prefill"],
                "decode": first["decode"],
                "medians_ms": medians,
                "max_over_min": max(medians) / min(medians),
                "met": max(medians) / min(medians) <= BOOT_SPREAD_TARGET,
            }
        )
    return rows


def judge_boot_spread(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The worst shape's boot-to-boot max/min against BOOT_SPREAD_TARGET: a catalog whose boots
    disagree more than that cannot separate policies whose predicted TTFTs differ by less."""
    worst = max(rows, key=lambda r: r["max_over_min"])
    return {
        "target": f"boot-to-boot max/min <= {BOOT_SPREAD_TARGET} per graph",
        "worst": {k: worst[k] for k in ("prefill", "decode", "max_over_min")},
        "met": worst["max_over_min"] <= BOOT_SPREAD_TARGET,
    }


def run_ttft(params: dict[str, Any], emit: Emit) -> TtftResult:
    from scheduler_core.execution import TableExecution
    from scheduler_core.planner import plan
    from scheduler_core.request import Request

    from .capture import catalog_of, isolated_ms
    from .device import host_load
    from .events import Progress
    from .execute import execute, prompt_tokens

    shapes, field = _prefill_shapes(params)
    steps = Progress(emit, len(shapes) + 2 + len(params["prompt_tokens"]) * len(params["policies"]))
    steps.start("booting")
    boot, stored = boot_here(params, shapes, field, steps)
    planning: Catalog = params["boot_catalog"] or catalog_of(stored["measurements"])
    clean = catalog_of(stored["measurements"], "clean_median_ms")
    truth = TableExecution.from_catalog(clean)
    chosen = {  # whole prompts: no span, so no policy stalls
        (n, policy): plan(policy, planning, Request(n), truth)
        for n in params["prompt_tokens"]
        for policy in params["policies"]
    }
    # Each graph a plan runs (its capacity at the key bucket of its chunk), timed alone: what the
    # launches would cost one by one, so the sequence's own effect on them can be told apart.
    measured = {g.prefill: g.ms for g in clean.graphs if g.decode == 0 and g.ms is not None}
    launched = [(l.graph, l.start) for p in chosen.values() for l in p.launches]
    alone = isolated_ms(boot, measured, launched, repeats(params, boot.device), params["warmup"], params["seed"])
    steps.advance(f"{len(alone)} graphs timed alone")
    arms, sequences = [], []
    conditions: TtftConditions = {"runs": params["runs"], "host_load": {"before": host_load()}}
    for n in params["prompt_tokens"]:
        prompt = prompt_tokens(boot, n, params["seed"])
        for policy in params["policies"]:
            p = chosen[(n, policy)]
            runs = sorted((execute(boot, p, prompt) for _ in range(params["runs"])), key=lambda r: r.ttft_ms)
            keys = [boot.prefill_launcher(l.graph, l.start).step.keys for l in p.launches]
            arm = _arm(n, p, runs, keys, [alone[(l.graph, k)] for l, k in zip(p.launches, keys)])
            sequences.append(sequence_timing(arm, runs[len(runs) // 2]))
            for launch in arm["launches"]:
                emit({"type": "launch", "prompt_tokens": n, "policy": policy, **launch})
            arms.append(arm)
            steps.advance(f"{n} tokens {policy}: {arm['ttft_ms']:.2f} ms")
    conditions["host_load"]["after"] = host_load()
    return {
        **cast(Boot, stored),
        "planning_catalog": planning.to_dicts(),
        "planning_catalog_source": "given" if params["boot_catalog"] else "this boot",
        "alone_ms": [{"prefill": c, "keys": k, "ms": ms} for (c, k), ms in sorted(alone.items())],
        "arms": arms,
        "sequences": sequences,
        "ttft_conditions": conditions,  # what the TTFT runs ran beside (the boot's own: provenance)
    }


def _arm(prompt: int, chosen: Any, runs: list[Any], keys: list[int], alone: list[float]) -> TtftArm:
    """One (prompt, policy) row, all from the median run (by TTFT): its TTFT, each launch's device
    time and their sum, next to what the harness predicted and what each graph costs alone; and
    the gap between TTFT and prediction split by where it comes from (`errors`)."""
    median = runs[len(runs) // 2]
    launches: list[TtftLaunch] = [
        {
            "index": i,
            "graph": l.graph,
            "start": l.start,
            "end": l.end,
            "padding": l.padding,
            "chooser": l.chooser,
            "keys": k,
            "predicted_ms": l.predicted_ms,
            "table_ms": t,
            "alone_ms": a,
            "ms": ms,
        }
        for i, (l, k, t, a, ms) in enumerate(zip(chosen.launches, keys, chosen.true_ms, alone, median.launch_ms))
    ]
    arm: TtftArm = {
        "prompt_tokens": prompt,
        "policy": chosen.policy,
        "launch_count": len(launches),
        "graphs": list(chosen.graphs),
        "padded_tokens": chosen.padded_tokens,
        "ttft_ms": median.ttft_ms,
        "ttft_runs_ms": [r.ttft_ms for r in runs],
        "launch_sum_ms": sum(median.launch_ms),
        "alone_ms": sum(alone),
        "predicted_ms": sum(l.predicted_ms for l in chosen.launches),
        "table_ms": chosen.ttft_ms,
        "first_token": median.first_token,
        "launches": launches,
        "errors": [],  # split from the figures above, next
    }
    arm["errors"] = error_split(arm, sum(median.copy_ms))
    return arm


def sequence_timing(arm: TtftArm, run: Any) -> dict[str, Any]:
    """A plan's launch sequence as a serve runs it (its shapes mixed, in order), from the same median
    run as its arm: the whole sequence's device time beside the launches', the copies' and the
    device's idle time between them, and the host's TTFT."""
    return {
        "prompt_tokens": arm["prompt_tokens"],
        "policy": arm["policy"],
        "graphs": [l["graph"] for l in arm["launches"]],
        "sequence_ms": run.sequence_ms,
        "launches_ms": sum(run.launch_ms),
        "copies_ms": sum(run.copy_ms),
        "device_idle_ms": run.device_idle_ms,
        "ttft_ms": run.ttft_ms,
    }


def run_numerics(params: dict[str, Any], emit: Emit) -> NumericsResult:
    """Verdicts against the dtype's tolerance; the same chunking run twice must be bitwise identical."""
    from .capture import catalog_of
    from .events import Progress
    from .numerics import compare_chunkings

    shapes, field = _prefill_shapes(params)
    steps = Progress(emit, len(shapes) + 1 + 1 + 2)  # capture, reference, two policies
    steps.start("booting")
    boot, stored = boot_here(params, shapes, field, steps)
    planning: Catalog = params["boot_catalog"] or catalog_of(stored["measurements"])
    return cast(
        NumericsResult,
        {
            "provenance": stored["provenance"],
            "prompt_tokens": params["prompt_tokens"],
            "planning_catalog_source": "given" if params["boot_catalog"] else "this boot",
            **compare_chunkings(boot, planning, params["prompt_tokens"], params["seed"], steps.advance),
        },
    )


OLD_NAMES = {"catalog": "boot_catalog"}  # renamed on 2026-11-30: one name for a boot's catalog in every kind

ANALYSES: dict[str, Analysis[Any]] = {
    a.name: a
    for a in (
        Analysis(
            "capture",
            "One boot: capture a graph per catalog shape and time its launches into a catalog.",
            (*BOOT_PARAMS, DECODE_ROWS, GRAPHS, BOOTS),
            run_capture,
            work=lambda p: p["boots"] * len(_capture_shapes(p)[0]) * repeats(p),
            max_work=50_000,
            format_text=capture_text,
            aliases=OLD_NAMES,
            check=check_capture,
            events=(ProgressEvent, MeasurementEvent),
            result=CaptureResult,
            needs_recipe="a capture stores its catalog under a recipe: choose one",
            boots=capture_boots,
            example={
                "capacities": [16, 32],
                "decode_rows": [2],
                "graphs": "prefill+decode",
                "repeats": 1,
                "boots": 2,
                "device": "cpu",
                "drift_capacities": [32],
                "drift_load": 1,
            },
        ),
        Analysis(
            "ttft",
            "Real TTFT: execute each policy's plan on the model, next to the harness's prediction.",
            (*BOOT_PARAMS, PROMPTS, POLICIES_PARAM, RUNS),
            run_ttft,
            work=lambda p: (
                len(_prefill_shapes(p)[0]) * repeats(p) + len(p["prompt_tokens"]) * len(p["policies"]) * p["runs"]
            ),
            max_work=50_000,
            format_text=ttft_text,
            aliases=OLD_NAMES,
            check=check_ttft,
            events=(ProgressEvent, MeasurementEvent, TtftLaunchEvent),
            result=TtftResult,
            example={"capacities": [16, 32, 64], "repeats": 1, "runs": 1, "prompt_tokens": [100], "device": "cpu"},
        ),
        Analysis(
            "numerics",
            "First-token logits under cost vs rule chunkings, repeated, and vs a one-shot prefill.",
            (*BOOT_PARAMS, PROMPT),
            run_numerics,
            work=lambda p: len(_prefill_shapes(p)[0]) * repeats(p),
            max_work=50_000,
            format_text=numerics_text,
            aliases=OLD_NAMES,
            check=check_numerics,
            events=(ProgressEvent, MeasurementEvent),
            result=NumericsResult,
            example={"capacities": [16, 32, 64], "repeats": 1, "prompt_tokens": 150, "device": "cpu"},
        ),
    )
}
