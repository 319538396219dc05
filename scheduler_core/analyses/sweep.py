"""TTFT, launches and padding against prompt length, per policy and catalog: where the rule
wins or loses against the cost model, and by how much (the pull request shows two points;
this draws the whole curve)."""

from __future__ import annotations

import math
from typing import Any, NotRequired, TypedDict

from ..catalog import Catalog
from ..comparison import Pair, default_pair, pair_in, policies_run
from ..errors import InvalidInput
from ..limits import MAX_TOKENS
from ..planner import plan
from ..policies import make_policy
from ..request import Request
from .catalogs import (
    CATALOG_NAMES,
    DRIFT_PARAM,
    EXECUTION_PARAMS,
    EXECUTION_PROFILE,
    boot_or_profile_schema,
    boot_setting,
    check_boot_or_profile,
    execution_dict,
    execution_of,
    pr22_catalogs,
)
from .contract import Analysis, Emit
from .pacing import Ticker
from .params import CatalogParam, ChoiceListParam, ChoiceParam, IntParam, PolicyListParam

TIE_MS = 1e-6  # TTFTs are rounded to 6 decimals; closer than this is a tie
FULL_CHUNK = 4096  # the pull request's catalogs' largest graph; sizes their work estimate


class Series(TypedDict):
    """One policy on one catalog, aligned with the result's `prompt_tokens`."""

    ttft_ms: list[float]
    launches: list[int]
    padded_tokens: list[int]


class Summary(TypedDict):
    """How often and by how much the pair's after beats or trails its before on one catalog."""

    prompts: int
    after_wins: int
    after_loses: int
    ties: int
    mean_delta_ms: float
    max_loss_ms: float
    max_loss_at: int | None
    max_gain_ms: float
    max_gain_at: int | None
    mean_launches_saved: float
    mean_extra_padding: float


class SweepResult(TypedDict):
    """`series[catalog][policy]` and the `policies` planned, in run order (a stored object's keys
    keep no order); with two policies or more, `pair` (the first two, as `comparison.default_pair`
    declares), `delta_ms[catalog]` (after - before TTFT per prompt length, derived, so beside the
    series rather than among their policies) and `summary[catalog]`: any other pair is `compared`."""

    execution: dict[str, Any]
    drift_factor: float
    spacing: str
    prompt_tokens: list[int]
    policies: list[str]
    series: dict[str, dict[str, Series]]
    pair: NotRequired[dict[str, str] | None]  # absent from results stored before it (cost, rule)
    delta_ms: dict[str, list[float]]
    summary: dict[str, Summary]


def prompt_lengths(params: dict[str, Any]) -> list[int]:
    """`count` lengths from prompt_min to prompt_max, log or linearly spaced, rounded and deduplicated."""
    lo, hi, count = params["prompt_min"], params["prompt_max"], params["count"]
    fractions = [i / (count - 1) for i in range(count)] if count > 1 else [1.0]
    if params["spacing"] == "log":
        points = (math.exp(math.log(lo) + f * (math.log(hi) - math.log(lo))) for f in fractions)
    else:
        points = (lo + f * (hi - lo) for f in fractions)
    return sorted({min(hi, max(lo, round(x))) for x in points})


def check(params: dict[str, Any]) -> None:
    if params["prompt_min"] > params["prompt_max"]:
        raise InvalidInput("prompt_min", f"must be <= prompt_max ({params['prompt_min']} > {params['prompt_max']})")
    check_boot_or_profile(params, "boot_catalog")


def work(params: dict[str, Any]) -> int:
    """Launch decisions: each plan makes about one per full chunk of its prompt, the full chunk being
    the largest graph of the catalog it runs on (a boot of 1-token graphs makes one per token)."""
    boot: Catalog | None = params["boot_catalog"]
    plans_per_length = len(params["policies"]) * (1 if boot else len(params["catalogs"]))
    full_chunk = boot.full_chunk if boot else FULL_CHUNK
    return plans_per_length * sum(n // full_chunk + 1 for n in prompt_lengths(params))


def run(params: dict[str, Any], emit: Emit) -> SweepResult:
    if params["boot_catalog"] is not None:
        execution, boot = boot_setting(params["boot_catalog"], params["first_token_ms"])
        catalogs = {"boot": boot}
    else:
        execution = execution_of(params)
        catalogs = {
            name: c
            for name, c in pr22_catalogs(execution, params["drift_factor"]).items()
            if name in params["catalogs"]
        }
    policies = {name: make_policy(name) for name in params["policies"]}  # one each: their tables are reused
    lengths = prompt_lengths(params)
    ticker = Ticker(emit, len(lengths) * len(policies) * len(catalogs))
    done = 0
    series: dict[str, dict[str, Series]] = {}
    for catalog_name, catalog in catalogs.items():
        per_policy: dict[str, Series] = {}
        for policy_name, policy in policies.items():
            line: Series = {"ttft_ms": [], "launches": [], "padded_tokens": []}
            per_policy[policy_name] = line
            for n in lengths:
                p = plan(policy, catalog, Request(n), execution)
                line["ttft_ms"].append(round(p.ttft_ms or 0.0, 6))
                line["launches"].append(len(p.launches))
                line["padded_tokens"].append(p.padded_tokens)
                done += 1
                ticker.tick(done, f"{catalog_name} {policy_name}")
        series[catalog_name] = per_policy
    pair = default_pair(list(policies))
    deltas, summary = compared(lengths, series, pair)
    return {
        "execution": execution_dict(execution),
        "drift_factor": params["drift_factor"],
        "spacing": params["spacing"],
        "prompt_tokens": lengths,
        "policies": list(policies),
        "series": series,
        "pair": pair.to_dict() if pair else None,
        "delta_ms": deltas,
        "summary": summary,
    }


def compared(
    lengths: list[int], series: dict[str, dict[str, Series]], pair: Pair | None
) -> tuple[dict[str, list[float]], dict[str, Summary]]:
    """Per catalog, `pair`'s after - before TTFT per prompt length and its `summarise`: what a
    result stores for its first two policies, and what its readers make for the pair they pick.
    Empty where the catalog did not plan both."""
    deltas: dict[str, list[float]] = {}
    summary: dict[str, Summary] = {}
    for catalog, by_policy in series.items():
        if (both := pair_in(list(by_policy), pair)) is not None:
            before, after = by_policy[both.before], by_policy[both.after]
            deltas[catalog] = [round(a - b, 6) for a, b in zip(after["ttft_ms"], before["ttft_ms"], strict=True)]
            summary[catalog] = summarise(lengths, before, after, deltas[catalog])
    return deltas, summary


def summarise(lengths: list[int], before: Series, after: Series, delta: list[float]) -> Summary:
    """How often and by how much `after` beats or trails `before` (delta = after - before, ms)."""
    worst = max(range(len(delta)), key=lambda i: (delta[i], -i))
    best = min(range(len(delta)), key=lambda i: (delta[i], i))
    return {
        "prompts": len(lengths),
        "after_wins": sum(d < -TIE_MS for d in delta),
        "after_loses": sum(d > TIE_MS for d in delta),
        "ties": sum(abs(d) <= TIE_MS for d in delta),
        "mean_delta_ms": round(sum(delta) / len(delta), 6),
        "max_loss_ms": max(delta[worst], 0.0),
        "max_loss_at": lengths[worst] if delta[worst] > TIE_MS else None,
        "max_gain_ms": max(-delta[best], 0.0),
        "max_gain_at": lengths[best] if delta[best] < -TIE_MS else None,
        "mean_launches_saved": round(sum(b - a for b, a in zip(before["launches"], after["launches"])) / len(delta), 6),
        "mean_extra_padding": round(
            sum(a - b for b, a in zip(before["padded_tokens"], after["padded_tokens"])) / len(delta), 6
        ),
    }


def format_text(result: SweepResult, pair: Pair | None = None) -> str:
    """One line per catalog: `pair`'s after against its before (by default the first two policies)."""
    pair = pair or default_pair(policies_run(result))
    head = (
        f"{len(result['prompt_tokens'])} prompt lengths, {result['prompt_tokens'][0]} .. "
        f"{result['prompt_tokens'][-1]} tokens ({result['spacing']}); "
    )
    if not pair:
        return head + "one policy: no delta"
    lines = [head + f"delta = {pair.label} TTFT"]
    for name, s in compared(result["prompt_tokens"], result["series"], pair)[1].items():
        loss = f"max loss {s['max_loss_ms']:+.2f} ms at {s['max_loss_at']}" if s["max_loss_at"] else "never loses"
        gain = f"max gain {s['max_gain_ms']:.2f} ms at {s['max_gain_at']}" if s["max_gain_at"] else "never wins"
        lines.append(
            f"{name:<6} {pair.after} wins {s['after_wins']}, loses {s['after_loses']}, ties {s['ties']}; "
            f"mean {s['mean_delta_ms']:+.2f} ms; {loss}; {gain}; "
            f"{s['mean_launches_saved']:.2f} launches saved on average"
        )
    return "\n".join(lines)


ANALYSIS = Analysis(
    name="sweep",
    summary="TTFT, launches and padding against prompt length for cost and rule, clean and drift catalogs.",
    params=(
        IntParam("prompt_min", 1, "shortest prompt (tokens)", minimum=1, maximum=MAX_TOKENS),
        IntParam("prompt_max", 131072, "longest prompt (tokens; at least prompt_min)", minimum=1, maximum=MAX_TOKENS),
        IntParam(
            "count", 256, "prompt lengths to sample (duplicates after rounding are dropped)", minimum=1, maximum=100_000
        ),
        ChoiceParam("spacing", "log", "how the lengths are spaced", choices=("log", "linear")),
        PolicyListParam("policies", help="policies to plan with"),
        ChoiceListParam("catalogs", list(CATALOG_NAMES), "catalogs to plan against", choices=CATALOG_NAMES),
        EXECUTION_PROFILE,
        *EXECUTION_PARAMS,
        DRIFT_PARAM,
        CatalogParam(
            "boot_catalog",
            None,
            "a measured boot (e.g. a gpu_runner capture) to sweep instead of "
            "clean/drift; its own durations are the true costs (replaces catalogs and the execution model)",
        ),
    ),
    run=run,
    schema_rules=(boot_or_profile_schema("boot_catalog"),),
    check=check,
    work=work,
    max_work=20_000_000,
    format_text=format_text,
    pair_text=format_text,
    result=SweepResult,
    aliases={"min_tokens": "prompt_min", "max_tokens": "prompt_max"},  # renamed on 2026-11-30
    example={"count": 10, "prompt_max": 9000},
)
