"""The pull request's determinism claim, measured: replay N boots, each measuring the catalog
with fresh noise, and count the distinct launch sequences each policy produces for the same
prompts. The true execution model never changes, so a TTFT spread is the price of following noise.
Real boots (catalogs captured by gpu_runner) can replace the simulated ones."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any, TypedDict

from ..catalog import Catalog, Graph, noise
from ..execution import ExecutionModel, TableExecution, measured_catalog
from ..limits import MAX_TOKENS
from ..planner import plan
from ..policies import PR22_ARMS, make_policy
from ..request import Request
from .catalogs import (
    EXECUTION_PARAMS,
    EXECUTION_PROFILE,
    boot_or_profile_schema,
    check_boot_or_profile,
    execution_dict,
    execution_of,
)
from .contract import Analysis, Emit
from .pacing import Ticker
from .params import CatalogListParam, FloatParam, IntListParam, IntParam, PolicyListParam

DP_STEP = 64  # the default catalog's capacity gcd: one cost-table row per 64 tokens


def work(params: dict[str, Any]) -> int:
    """Per boot and policy: the cost table for the longest prompt plus about one decision per 4096 tokens."""
    prompts = params["prompts"]
    per_boot = max(prompts) // DP_STEP + sum(n // 4096 + 1 for n in prompts)
    boots = len(params["boot_catalogs"]) if params["boot_catalogs"] else params["boots"]
    return int(boots * len(params["policies"]) * per_boot)


def boot_catalogs(params: dict[str, Any]) -> tuple[ExecutionModel, Callable[[int], Catalog], int]:
    """(truth, boot -> catalog, boots): simulated noisy boots, or real ones measured on hardware.

    Real boots are judged against their per-shape median, the best estimate of the true cost."""
    if params["boot_catalogs"]:
        real: list[Catalog] = params["boot_catalogs"]
        median = median_catalog(real)
        return TableExecution.from_catalog(median, params["first_token_ms"]), real.__getitem__, len(real)
    execution = execution_of(params)
    clean = measured_catalog(execution)
    return execution, lambda boot: noise(clean, seed=params["seed"] + boot, sigma=params["sigma"]), params["boots"]


def median_catalog(catalogs: list[Catalog]) -> Catalog:
    """Each shape's median duration over the boots that measured it."""
    ms: dict[tuple[int, int], list[float]] = {}
    for catalog in catalogs:
        for g in catalog.graphs:
            if g.ms is not None:
                ms.setdefault(g.shape, []).append(g.ms)
    return Catalog(tuple(Graph(p, d, statistics.median(v)) for (p, d), v in sorted(ms.items())))


class BootsResult(TypedDict):
    """Per prompt, each policy's distinct launch sequences over the boots and the TTFT they span
    (`prompts[i][policy]`, beside `prompt_tokens`); `overall[policy]`: over every prompt, still
    counted per prompt (`per_prompt_summary`)."""

    execution: dict[str, Any]
    real_boots: bool
    boots: int
    sigma: float
    seed: int
    prompts: list[dict[str, Any]]
    overall: dict[str, dict[str, Any]]


def run(params: dict[str, Any], emit: Emit) -> BootsResult:
    execution, catalog_of, boots = boot_catalogs(params)
    policies = {name: make_policy(name) for name in params["policies"]}
    prompts = params["prompts"]
    requests = {n: Request(n) for n in prompts}
    sequences = {n: {name: Counter[tuple[int, ...]]() for name in policies} for n in prompts}
    ttfts: dict[int, dict[str, list[float]]] = {n: {name: [] for name in policies} for n in prompts}
    ticker = Ticker(emit, boots)
    for boot in range(boots):
        catalog = catalog_of(boot)
        for n, request in requests.items():
            for name, policy in policies.items():
                p = plan(policy, catalog, request, execution)
                sequences[n][name][p.graphs] += 1
                ttfts[n][name].append(p.ttft_ms or 0.0)
        ticker.tick(boot + 1, f"boot {boot + 1}")
    per_prompt = [
        {"prompt_tokens": n, **{name: _describe(sequences[n][name], ttfts[n][name]) for name in policies}}
        for n in prompts
    ]
    overall = {name: per_prompt_summary(per_prompt, name) for name in policies}
    return {
        "execution": execution_dict(execution),
        "real_boots": bool(params["boot_catalogs"]),
        "boots": boots,
        "sigma": params["sigma"],
        "seed": params["seed"],
        "prompts": per_prompt,
        "overall": overall,
    }


def per_prompt_summary(per_prompt: list[dict[str, Any]], policy: str) -> dict[str, Any]:
    """One policy over every prompt, still counted per prompt: the claim is "one sequence for each
    prompt", so the sequences of different prompts are never added up (three prompts planned one
    way each are 1 per prompt, not "3 distinct sequences")."""
    distinct = [row[policy]["distinct_sequences"] for row in per_prompt]
    return {
        "prompts": len(distinct),
        "prompts_with_one_sequence": sum(d == 1 for d in distinct),
        "max_distinct_sequences": max(distinct),
        "max_ttft_spread_ms": max(row[policy]["ttft_ms"]["spread"] for row in per_prompt),
    }


def _describe(sequences: Counter[tuple[int, ...]], ttft: list[float]) -> dict[str, Any]:
    graphs, boots = sequences.most_common(1)[0]
    return {
        "distinct_sequences": len(sequences),
        "most_common": {"graphs": list(graphs), "boots": boots},
        "launches": {"min": min(map(len, sequences)), "max": max(map(len, sequences))},
        "ttft_ms": {
            "min": round(min(ttft), 6),
            "max": round(max(ttft), 6),
            "spread": round(max(ttft) - min(ttft), 6),
            "mean": round(sum(ttft) / len(ttft), 6),
        },
    }


def format_text(result: BootsResult) -> str:
    """A line per prompt and policy: distinct sequences over the boots and the TTFT they span."""
    source = "real boots" if result["real_boots"] else f"boots, measurement noise sigma {result['sigma']}"
    lines = [f"{result['boots']} {source}"]
    for row in result["prompts"]:
        for name in result["overall"]:
            d = row[name]
            lines.append(
                f"{row['prompt_tokens']:>8} tokens {name:<5} distinct sequences {d['distinct_sequences']:>4}, "
                f"TTFT {d['ttft_ms']['min']:.2f} .. {d['ttft_ms']['max']:.2f} ms"
            )
    return "\n".join(lines)


ANALYSIS = Analysis(
    name="boots",
    summary="Distinct launch sequences and TTFT spread per policy over N boots with measurement noise.",
    params=(
        IntParam("boots", 64, "boots to simulate (boot b draws its noise with seed + b)", minimum=1, maximum=10_000),
        FloatParam("sigma", 0.05, "log-normal measurement noise per graph", minimum=0.0, maximum=2.0),
        IntParam("seed", 0, "seed of the first boot", minimum=0, maximum=2**31 - 1),
        IntListParam(
            "prompts",
            [*PR22_ARMS.values(), 131072],
            "prompt lengths (tokens)",
            minimum=1,
            maximum=MAX_TOKENS,
            max_items=64,
        ),
        PolicyListParam("policies", help="policies to plan with"),
        CatalogListParam(
            "boot_catalogs",
            None,
            "real boots (e.g. stored captures of one recipe) instead of "
            "simulated noise; judged against their per-shape median",
            max_items=256,
        ),
        EXECUTION_PROFILE,
        *EXECUTION_PARAMS,
    ),
    run=run,
    schema_rules=(boot_or_profile_schema("boot_catalogs"),),
    check=lambda params: check_boot_or_profile(params, "boot_catalogs"),
    work=work,
    max_work=50_000_000,
    format_text=format_text,
    result=BootsResult,
    example={"boots": 6, "prompts": [3504, 14000], "sigma": 0.2},
)
