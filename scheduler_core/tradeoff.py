"""The pull request's trade-off, assembled from the evidence a decision cites: one summary in its own layout.

Every cited job of a kind is a part (never "the newest job of each kind"), and every part names its
source (`evidence.source`). A part run on another recipe or other hardware than the decision's is
marked `foreign` and listed after the decision's own; the verdict reads only the decision's own
parts, so an H100 figure is never read as an A100 recipe's. A kind no evidence covers is an empty
list, so what was not measured shows as plainly as what was. Every delta is `after - before` of the
decision's pair (`comparison.Pair`), whatever the two policies; each pr22 arm also shows the cost
model on the *repaired* catalog, the narrower alternative the pull request names. A measured timing
on a CPU, or spread wider than SPREAD_BOUND over its runs, is `indicative`, with why. The checklist
is the pull request's own list of what it did not do, ticked by evidence. `docs/decisions.md`
describes each part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .analyses.boots import BootsResult, per_prompt_summary
from .analyses.capacity import CapacityResult
from .analyses.catalogs import execution_of, pr22_catalogs
from .analyses.fuzz import FuzzResult
from .analyses.pr22 import Pr22Result
from .analyses.replay import ReplayResult
from .analyses.simulate import SimulateResult
from .analyses.sweep import SweepResult, summarise
from .catalog import Catalog
from .comparison import Pair, deltas_of, pair_in, paired_intervals, percentile_delta, request_deltas
from .deltas import capacity_differences
from .errors import InvalidInput
from .evidence import Evidence, Subject, source
from .health import boot_health, repaired
from .measured import LogitsComparison, MeasuredNumerics, MeasuredOn, MeasuredTtft, TtftArm
from .planner import plan
from .request import Request
from .saturation import overloaded_runs
from .stats import round6
from .typed_json import read_as

__all__ = ["Evidence", "Pair", "StoredBoot", "Subject", "tradeoff", "checklist", "missing", "parse_required"]

Json = dict[str, Any]
SPREAD_BOUND = 0.10  # (slowest - fastest) / median of a timing's runs above which it is not read as GPU timing
DETERMINISTIC = "deterministic (a trace on a fixed execution model)"
GPU_MODE = "cuda-graph"  # gpu_runner's mode on a GPU; "eager-cpu" on a CPU
SERVING = ("simulate", "capacity", "replay")  # the kinds that serve traffic (the per-request comparison)

CHECKLIST: tuple[tuple[str, str], ...] = (
    ("recipe_run", "per-recipe run on this recipe's boots"),
    ("real_ttft", "real TTFT measured"),
    ("numerics", "numerics measured"),
    ("boots_compared", "boots compared"),
    ("liveness_fuzzed", "liveness fuzzed"),
)
CHECKLIST_ITEMS: tuple[str, ...] = tuple(key for key, _ in CHECKLIST)
# A measured TTFT further than this share from its prediction is listed with a caveat (docs/decisions.md).
OFF_PREDICTION_BOUND = 0.25


@dataclass(frozen=True)
class StoredBoot:
    """One stored boot of the decision's recipe."""

    id: int
    catalog: Catalog


def parse_required(items: Any, field: str = "required_evidence") -> list[str]:
    """A recipe's required checklist items: known keys, no repeats."""
    if not isinstance(items, list) or any(not isinstance(i, str) for i in items):
        raise InvalidInput(field, f"must be a list of checklist items {list(CHECKLIST_ITEMS)}")
    unknown = [i for i in items if i not in CHECKLIST_ITEMS]
    if unknown:
        raise InvalidInput(field, f"unknown checklist item {unknown[0]!r}; choose from {list(CHECKLIST_ITEMS)}")
    return list(dict.fromkeys(items))


Summarise = Callable[[Evidence, Pair], Any]


def tradeoff(evidence: Sequence[Evidence], *, subject: Subject, pair: Pair, boots: Sequence[StoredBoot] = ()) -> Json:
    """The whole summary: per kind, a part for every cited job of it (the decision's own first),
    the per-request comparisons, the checklist, then the verdict read from the decision's own parts."""
    cited = sorted(evidence, key=lambda e: e.id)
    involved = _boots_involved(evidence, boots)
    parts: dict[str, Summarise] = {
        "arms": _arms,
        "sweep": _sweep,
        "boots": _boots,
        "fuzz": _fuzz,
        "simulate": _simulate,
        "capacity": _capacity,
        "replay": _replay,
        "ttft": _ttft,
        "numerics": _numerics,
    }
    kinds = {"arms": "pr22"}
    out: Json = {"pair": pair.to_dict(), "subject": {"recipe": subject.recipe, "hardware": subject.hardware}}
    for name, summarise_part in parts.items():
        jobs = [job for job in cited if job.kind == kinds.get(name, name)]
        out[name] = _ordered([_part(summarise_part, job, subject, pair) for job in jobs])
    serving = [job for job in cited if job.kind in SERVING]
    out["requests"] = _ordered([r for job in serving if (r := _part(_requests, job, subject, pair)) is not None])
    ttft_jobs = [job for job in cited if job.kind == "ttft"]
    out["ttft_conditions"] = [_part(lambda j, _p: ttft_conditions(j), job, subject, pair) for job in ttft_jobs]
    out["health"] = _health(involved, boots) if involved else None
    out["checklist"] = checklist(evidence, recipe=subject.recipe, to_policy=pair.after, boots=boots)
    return out


def _ordered(parts: list[Json]) -> list[Json]:
    """The decision's own parts first, then the foreign ones, each in citing order (job id)."""
    return sorted(parts, key=lambda p: (not p["source"]["own"], p["source"]["job"]))


def _part(summarise_part: Summarise, job: Evidence, subject: Subject, pair: Pair) -> Any:
    """One job's part with its source; a stored result this version cannot read (an older layout)
    is named, not a crash. None where the job holds nothing for this part (no per-request rows)."""
    try:
        part = summarise_part(job, pair)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        part = {"job": job.id, "error": f"job {job.id}'s {job.kind} result is not readable here ({exc!r})"}
    if part is None:
        return None
    traffic = job.result.get("traffic")
    return {**part, "source": source(job, subject, _traffic_text(traffic) if isinstance(traffic, dict) else None)}


def _side(p: Any) -> Json:
    return {"launches": len(p.launches), "ttft_ms": round(p.ttft_ms or 0.0, 6), "padded_tokens": p.padded_tokens}


def _arms(job: Evidence, pair: Pair) -> Json:
    """pr22's arms as published (the pull request's own cost and rule, whatever the decision's
    pair), plus the cost model planning on each catalog repaired."""
    result = read_as(job.result, Pr22Result)
    execution = execution_of(result["execution"])
    catalogs = pr22_catalogs(execution, result["drift_factor"])
    rows = []
    for arm in result["arms"]:
        catalog = catalogs[arm["catalog"]]
        fixed = repaired(catalog, [catalog])
        on_repaired = plan("cost", fixed.catalog, Request(arm["prompt_tokens"]), execution)
        rows.append(
            {
                "arm": arm["arm"],
                "prompt_tokens": arm["prompt_tokens"],
                "catalog": arm["catalog"],
                "cost": {k: arm["cost"][k] for k in ("launches", "ttft_ms", "padded_tokens")},
                "rule": {k: arm["rule"][k] for k in ("launches", "ttft_ms", "padded_tokens")},
                "delta_ms": arm["delta_ms"],
                "repaired": {**_side(on_repaired), "replaced": list(fixed.replaced)},
                "repaired_delta_ms": round(arm["rule"]["ttft_ms"] - (on_repaired.ttft_ms or 0.0), 6),
            }
        )
    return {"job": job.id, "rows": rows}


def _sweep(job: Evidence, pair: Pair) -> Json:
    """Per catalog, how often and by how much `after` beats or trails `before` (after - before, ms),
    from the two policies' own series; None per catalog where the sweep did not plan both."""
    result = read_as(job.result, SweepResult)
    lengths = result["prompt_tokens"]
    catalogs: dict[str, Json | None] = {}
    for name, series in result["series"].items():
        if pair_in(list(series), pair) is None:
            catalogs[name] = None
            continue
        before, after = series[pair.before], series[pair.after]
        delta = [round(a - b, 6) for a, b in zip(after["ttft_ms"], before["ttft_ms"], strict=True)]
        catalogs[name] = dict(summarise(lengths, before, after, delta))
    return {"job": job.id, "catalogs": catalogs}


def _boots(job: Evidence, pair: Pair) -> Json:
    result = read_as(job.result, BootsResult)
    return {
        "job": job.id,
        "boots": result["boots"],
        "real_boots": result["real_boots"],
        # recounted from the per-prompt rows, so a result stored with the old summed layout reads the same
        "policies": {
            name: per_prompt_summary(result["prompts"], name) for name in _pair_first(result["overall"], pair)
        },
    }


def _pair_first(names: Any, pair: Pair) -> list[str]:
    """The policies a job ran, the decision's before and after first."""
    ran = list(names)
    return [n for n in (pair.before, pair.after) if n in ran] + [n for n in ran if n not in (pair.before, pair.after)]


def _fuzz(job: Evidence, pair: Pair) -> Json:
    result = read_as(job.result, FuzzResult)
    policies = result["policies"]
    return {
        "job": job.id,
        "cases": result["cases"],
        "policies": {
            name: {"stalls": policies[name]["stalls"], "violations": policies[name]["violations"]}
            for name in _pair_first(policies, pair)
        },
    }


def _serving_run(job_id: int, result: SimulateResult | ReplayResult) -> Json:
    """What a serving run ran on, as the simulate and replay parts both begin: the job, its catalog
    and requests, its traffic and what its durations are."""
    return {
        "job": job_id,
        "catalog": result["catalog"],
        "requests": result["requests"],
        "traffic": _traffic_text(result["traffic"]),
        "basis": _basis(result["execution"]),
    }


def _simulate(job: Evidence, pair: Pair) -> Json:
    result = read_as(job.result, SimulateResult)
    policies = {p["policy"]: p for p in result["policies"]}
    return {
        **_serving_run(job.id, result),
        "policies": {
            name: {
                "ttft_p50_ms": p["ttft_ms"]["p50"] if p["ttft_ms"] else None,
                "ttft_p99_ms": p["ttft_ms"]["p99"] if p["ttft_ms"] else None,
                "padded_prefill_tokens": p["padded_prefill_tokens"],
                "padded_prefill_ms": p.get("padded_prefill_ms"),  # absent from results older than it
                "stalled": p["stalled"],
            }
            for name in _pair_first(policies, pair)
            for p in [policies[name]]
        },
        "delta": _run_delta(result["traffic"], policies, pair),
        "overloaded": overloaded_runs(result, (pair.before, pair.after)),
    }


def _run_delta(traffic: Json, policies: dict[str, Json], pair: Pair) -> Json | None:
    """after - before at p50 and p99 of one run (a difference of percentiles): a trace is
    deterministic, a Poisson run one seeded draw. None unless the run has both policies."""
    row = percentile_delta(policies, pair) if pair_in(list(policies), pair) else None
    if row is None:
        return None
    if traffic["source"] == "trace":
        return {**row, "randomness": DETERMINISTIC}
    return {**row, "randomness": f"one seeded Poisson draw (seed {traffic['seed']}): no interval"}


def _replay(job: Evidence, pair: Pair) -> Json:
    """Each replayed policy beside what the engine served under each policy it ran (the same four
    figures), the share of the served requests each replay repeats launch for launch, and after -
    before at p50/p99; a replay is a trace on a fixed setting, so deterministic."""
    result = read_as(job.result, ReplayResult)
    figures = ("ttft_p50_ms", "ttft_p99_ms", "prefill_launches", "padded_prefill_tokens")
    served = result["served"]
    reproduced = {r["policy"]: r for r in result["reproduction"]}
    return {
        **_serving_run(job.id, result),
        "randomness": DETERMINISTIC if result["deterministic"] else result["randomness"],
        "deterministic": result["deterministic"],
        "replayed": {
            row["policy"]: {
                **{k: row[k] for k in ("requests", *figures, "stalled")},
                "reproduction": reproduced.get(row["policy"]),
            }
            for row in result["table"]
        },
        "served": None
        if served is None
        else {row["policy"]: {k: row[k] for k in ("requests", *figures)} for row in served["policies"]},
        "engines": served["engines"] if served else [],
        "delta": _run_delta(result["traffic"], {p["policy"]: p for p in result["policies"]}, pair),
        "overloaded": overloaded_runs(result, (pair.before, pair.after)),
    }


def _traffic_text(traffic: Json) -> str:
    if traffic["source"] == "trace":
        scale = traffic.get("time_scale", 1.0)
        return f"trace {traffic['name']}" + (f", gaps x{scale:g}" if scale != 1.0 else "")
    return "Poisson traffic"


def _basis(execution: Json) -> str:
    """What the durations of a serving run are: a model, a published GPU profile, or a stored boot."""
    if "execution" in execution:
        return f"GPU profile {execution['execution']} ({execution['provenance'].get('gpu', '?')}, published timings)"
    if execution.get("table") == "boot":
        return "a stored boot's measured durations"
    return (
        f"affine cost model ({execution['fixed_ms']:g} ms + {execution['ms_per_token']:g} ms per token), not measured"
    )


def _capacity(job: Evidence, pair: Pair) -> Json:
    """Capacity at the SLO per policy, and after - before at p50/p99 per rate with its interval."""
    r = read_as(job.result, CapacityResult)
    deterministic = r["repeats"] == 1 and r["traffic"]["source"] == "trace"
    at = _operating_index(r)
    by_name = {p["policy"]: p for p in r["policies"]}
    return {
        "job": job.id,
        "slo": r["slo"],
        "traffic": _traffic_text(r["traffic"]),
        "basis": _basis(r["execution"]),
        "repeats": r["repeats"],
        "randomness": DETERMINISTIC if deterministic else r["randomness"],
        "deterministic": deterministic,
        "policies": {
            name: {
                "capacity_per_s": by_name[name]["capacity_per_s"],
                "padded_prefill_ms": by_name[name]["points"][at].get("padded_prefill_ms"),  # absent from older results
            }
            for name in _pair_first(by_name, pair)
        },
        "padding_at_per_s": r["rates_per_s"][at],
        "deltas": _capacity_deltas(r, pair),
        "overloaded": overloaded_runs(r, (pair.before, pair.after)),
    }


def _capacity_deltas(result: CapacityResult, pair: Pair) -> list[Json]:
    """after - before TTFT p50 and p99 at every rate, paired by seed over the draws each point
    keeps; a result stored before points kept their draws has only its stored comparisons."""
    by_name = {p["policy"]: p for p in result["policies"]}
    if pair_in(list(by_name), pair) is None:
        return []
    keys = ("ttft_p50_ms", "ttft_p99_ms")
    rows = []
    for i, rate in enumerate(result["rates_per_s"]):
        points = {name: by_name[name]["points"][i] for name in (pair.before, pair.after)}
        if all("draws" in p for p in points.values()):
            found = paired_intervals({n: p["draws"] for n, p in points.items()}, pair, keys)
        elif stored := capacity_differences(deltas_of(result["deltas"][i].get("comparisons") or (), pair) or {}):
            found = {"ttft_p50_ms": stored.get("p50"), "ttft_p99_ms": stored.get("p99")}
        else:
            return []  # an older result: no draws to pair, and no stored comparison of this pair
        queueing = any(p.get("overloaded") for p in points.values())  # an overloaded run: its delta is queueing
        rows.append(
            {"rate_per_s": rate, "p50": found["ttft_p50_ms"], "p99": found["ttft_p99_ms"], "queueing": queueing}
        )
    return rows


def _operating_index(result: CapacityResult) -> int:
    """The rate a capacity job's single figures are read at: the highest rate every policy meets
    the SLO at (both within it), else the lowest rate."""
    meeting = [
        i for i in range(len(result["rates_per_s"])) if all(p["points"][i]["meets_slo"] for p in result["policies"])
    ]
    return meeting[-1] if meeting else 0


def _requests(job: Evidence, pair: Pair) -> Json | None:
    """The same requests under both policies (`comparison.request_deltas`): the after - before TTFT
    CDF and the worst requests, from a simulate or replay job's per-request rows (a replay's have
    simulate's shape), or a capacity job's operating rate (`_operating_index`), whose first draw's
    comparison of each pair it stored."""
    draws, rate = 1, None
    if job.kind == "capacity":
        capacity = read_as(job.result, CapacityResult)
        at = _operating_index(capacity)
        draws, rate = capacity["repeats"], capacity["rates_per_s"][at]
        deltas = (deltas_of(capacity["deltas"][at].get("comparisons") or (), pair) or {}).get("per_request")
    elif job.compared is not None:
        deltas = deltas_of(job.compared, pair)
    else:
        deltas = request_deltas(read_as(job.result, SimulateResult)["policies"], pair)
    if not deltas or not deltas["requests"]:
        return None
    keys = ("requests", "mean_ms", "p50", "p90", "p99", "max", "min", "share_after_slower", "share_after_faster")
    return {
        "job": job.id,
        "kind": job.kind,
        "rate_per_s": rate,
        "draw": f"the first of {draws} seeded draws" if draws > 1 else None,
        **{k: deltas[k] for k in keys},
        "cdf_ms": deltas["cdf_ms"],
        "worst": deltas["worst"],
        "catalog": job.result["catalog"],
    }


def _measured_on(job: Evidence) -> MeasuredOn:
    return read_as(job.result["provenance"], MeasuredOn)  # every ttft and numerics result has written it


def _device(on: MeasuredOn) -> str:
    return f"{on['device']} ({on['mode']})"


def timing_caveat(mode: str, runs: Sequence[float]) -> Json:
    """Whether a measured timing reads as GPU timing: measured with CUDA graphs, its runs within
    SPREAD_BOUND of each other; otherwise `indicative`, with why."""
    ordered = sorted(runs)
    median = ordered[len(ordered) // 2] if ordered else 0.0
    spread = (ordered[-1] - ordered[0]) / median if median > 0 else None
    why = _off_gpu(mode)
    if spread is not None and spread > SPREAD_BOUND:
        why.append(f"its {len(ordered)} runs spread {spread:.0%}, above the {SPREAD_BOUND:.0%} bound")
    return {
        "runs": len(ordered),
        "spread": None if spread is None else round6(spread),
        "indicative": bool(why),
        "why": "; ".join(why),
    }


def _off_gpu(mode: str) -> list[str]:
    return [] if mode == GPU_MODE else [f"measured {mode}, not on a GPU"]


def _runs_ms(arm: TtftArm) -> list[float]:
    return arm.get("ttft_runs_ms") or [arm["ttft_ms"]]  # absent from results older than it


def _ttft(job: Evidence, pair: Pair) -> Json:
    on = _measured_on(job)
    arms = [
        {
            "prompt_tokens": a["prompt_tokens"],
            "policy": a["policy"],
            "launches": a["launch_count"],
            "measured_ms": round(a["ttft_ms"], 6),
            "predicted_ms": round(a["predicted_ms"], 6),
            **timing_caveat(on["mode"], _runs_ms(a)),
        }
        for a in read_as(job.result, MeasuredTtft)["arms"]
    ]
    why = _off_gpu(on["mode"])
    wide = sum(a["spread"] is not None and a["spread"] > SPREAD_BOUND for a in arms)
    if wide:
        why.append(f"{wide} of {len(arms)} arms spread more than {SPREAD_BOUND:.0%} over their runs")
    return {
        "job": job.id,
        "device": _device(on),
        "arms": arms,
        "indicative": bool(why),
        "why": "; ".join(why),
        "spread_bound": SPREAD_BOUND,
    }


def ttft_conditions(job: Evidence) -> Json:
    """What a ttft job's timings ran beside (device, runs, the host's load) and, past
    OFF_PREDICTION_BOUND, each arm measured that far from its prediction, with its runs' range and
    a caveat: on a loaded host (a 1-minute load average of at least its cores) the machine's other
    work, not the plan, may be the gap, so the figure is no evidence of what a policy costs."""
    result, on = read_as(job.result, MeasuredTtft), _measured_on(job)
    recorded = result.get("ttft_conditions")  # absent from results older than it
    host_load = (recorded and recorded["host_load"]) or on.get("host_load")
    before = host_load["before"] if host_load else None
    load = None if before is None else {"load_average_1m": before["load_average"][0], "cores": before["cores"]}
    loaded = before is not None and before["cores"] is not None and before["load_average"][0] >= before["cores"]
    off = []
    for a in result["arms"]:
        predicted, runs = a["predicted_ms"], _runs_ms(a)
        share = (a["ttft_ms"] - predicted) / predicted if predicted > 0 else None
        if share is not None and abs(share) > OFF_PREDICTION_BOUND:
            off.append(
                {
                    "prompt_tokens": a["prompt_tokens"],
                    "policy": a["policy"],
                    "measured_ms": round(a["ttft_ms"], 6),
                    "predicted_ms": round(predicted, 6),
                    "off_percent": round(100 * share, 1),
                    "runs_ms": [round(min(runs), 6), round(max(runs), 6)],
                }
            )
    where = (
        "host load not recorded"
        if load is None
        else f"load average {load['load_average_1m']:.2f} on {load['cores']} cores"
    )
    caveat = None
    if off:
        arms = len(result["arms"])
        caveat = f"{len(off)} of {arms} arms measured more than {OFF_PREDICTION_BOUND:.0%} off their prediction"
        caveat += (
            f", on a loaded host ({where}): the machine's other work, not the plan, may explain the gap; "
            "not evidence of what a policy costs"
            if loaded
            else f" ({where})"
        )
    return {
        "job": job.id,
        "device": _device(on),
        "runs": recorded["runs"] if recorded else None,
        "host_load": load,
        "loaded": loaded,
        "conditions": where,
        "off_prediction_bound": OFF_PREDICTION_BOUND,
        "off_prediction": off,
        "caveat": caveat,
    }


def _numerics(job: Evidence, pair: Pair) -> Json:
    def compared(c: LogitsComparison) -> Json:
        return {"bitwise_identical": c["bitwise_identical"], "max_abs_diff": c["max_abs_diff"]}

    result = read_as(job.result, MeasuredNumerics)
    return {
        "job": job.id,
        "device": _device(_measured_on(job)),
        "prompt_tokens": result["prompt_tokens"],
        "cost_vs_rule": compared(result["cost_vs_rule"]),
        "vs_one_shot": {p: compared(c) for p, c in result["vs_one_shot"].items()},
        "reproducible": result["reproducible"],
    }


def _catalogs_in(params: Json) -> list[Catalog]:
    """The catalogs a job planned with, whichever parameter held them."""
    found = []
    for value in params.values():
        lists = value if isinstance(value, list) and value and isinstance(value[0], list) else [value]
        for item in lists:
            if isinstance(item, list) and item and isinstance(item[0], dict) and "prefill" in item[0]:
                try:
                    found.append(Catalog.from_dicts(item))
                except InvalidInput:
                    continue
    return found


def _boots_involved(evidence: Sequence[Evidence], boots: Sequence[StoredBoot]) -> list[StoredBoot]:
    used = [c for job in evidence for c in _catalogs_in(job.params)]
    return [b for b in boots if b.catalog in used]


def _health(involved: list[StoredBoot], boots: Sequence[StoredBoot]) -> Json:
    everyone = [b.catalog for b in boots]
    rows = [{"id": b.id, **boot_health(b.catalog, everyone).to_dict()} for b in involved]
    return {"boots": rows, "flagged": sum(row["status"] == "flagged" for row in rows)}


def checklist(
    evidence: Sequence[Evidence], *, recipe: str, to_policy: str, boots: Sequence[StoredBoot] = ()
) -> list[Json]:
    """Each of the pull request's limits, ticked by the jobs that lift it (or left open)."""
    involved = {b.catalog for b in _boots_involved(evidence, boots)}

    def on_recipe(job: Evidence) -> bool:
        measured_here = "provenance" in job.result  # a GPU kind booted this recipe's model itself
        planned_on_boots = any(c in involved for c in _catalogs_in(job.params))
        return job.recipe == recipe and (measured_here or planned_on_boots)

    def fuzzed(job: Evidence) -> bool:
        found = job.result["policies"].get(to_policy)
        return found is not None and found["stalls"] == 0 and found["violations"] == 0

    tests: dict[str, Callable[[Evidence], bool]] = {
        "recipe_run": on_recipe,
        "real_ttft": lambda job: job.kind == "ttft",
        "numerics": lambda job: job.kind == "numerics",
        "boots_compared": lambda job: job.kind == "boots",
        "liveness_fuzzed": lambda job: job.kind == "fuzz" and fuzzed(job),
    }
    return [
        {"item": key, "label": label, "done": bool(jobs), "jobs": jobs}
        for key, label in CHECKLIST
        for jobs in [sorted(job.id for job in evidence if tests[key](job))]
    ]


def missing(checklist_rows: Sequence[Json], required: Sequence[str]) -> list[str]:
    """The required items still open, in checklist order."""
    open_items = {row["item"] for row in checklist_rows if not row["done"]}
    return [key for key in CHECKLIST_ITEMS if key in required and key in open_items]
