"""The verdict a decision page opens with: a few lines read from the decision's own evidence.

Capacity at the SLO per policy, the after - before TTFT delta at p50 and p99 with its interval,
padding in GPU-ms, and what the evidence cannot vouch for (an overloaded run among it: its TTFT
delta is read as queueing, `saturation`). Only parts that are the decision's own
(its recipe, its hardware: `evidence.source`) are read as figures; foreign parts, parts whose
durations belong to no GPU, and kinds nobody cited are named under `cannot_vouch`, never averaged
in nor preferred.
"""

from __future__ import annotations

from typing import Any

from .tradeoff import DETERMINISTIC

Json = dict[str, Any]


def _own(parts: list[Json] | None) -> list[Json]:
    return [p for p in parts or [] if p["source"]["own"] and "error" not in p]


def verdict(summary: Json) -> Json:
    """`summary` is `tradeoff.tradeoff(...)`'s; returns {capacity, delta, padding, cannot_vouch}."""
    pair = summary["pair"]
    before, after = pair["before"], pair["after"]
    capacity = [
        {
            "job": p["job"],
            "hardware": p["source"]["hardware"],
            "slo": p["slo"],
            "before": p["policies"].get(before, {}).get("capacity_per_s"),
            "after": p["policies"].get(after, {}).get("capacity_per_s"),
            "before_ran": before in p["policies"],
            "after_ran": after in p["policies"],
        }
        for p in _own(summary["capacity"])
    ]
    return {
        "capacity": capacity,
        "delta": _deltas(summary),
        "padding": _padding(summary, before, after),
        "cannot_vouch": cannot_vouch(summary),
    }


def _deltas(summary: Json) -> list[Json]:
    """after - before at p50/p99: a capacity job's at its operating rate (with its interval over
    draws), a simulate or replay job's from its one run (deterministic or one draw)."""
    rows = []
    for p in _own(summary["capacity"]):
        at = next((d for d in p["deltas"] if d["rate_per_s"] == p["padding_at_per_s"]), None)
        if at is not None:
            rows.append(
                {
                    "job": p["job"],
                    "kind": "capacity",
                    "rate_per_s": at["rate_per_s"],
                    "p50": at["p50"],
                    "p99": at["p99"],
                    "deterministic": p["deterministic"],
                    "interval": not p["deterministic"],
                    "randomness": p["randomness"],
                    "queueing": bool(at.get("queueing")),  # either policy overloaded at that rate
                }
            )
    for kind in ("simulate", "replay"):
        for p in _own(summary[kind]):
            if p["delta"]:
                rows.append(
                    {
                        "job": p["job"],
                        "kind": kind,
                        "rate_per_s": None,
                        "p50": {"mean": p["delta"]["p50"]},
                        "p99": {"mean": p["delta"]["p99"]},
                        "deterministic": p["delta"]["randomness"] == DETERMINISTIC,
                        "interval": False,  # one run: no interval, its randomness says why
                        "randomness": p["delta"]["randomness"],
                        "queueing": bool(p.get("overloaded")),  # before's or after's run overloaded
                    }
                )
    return rows


def _padding(summary: Json, before: str, after: str) -> list[Json]:
    """Padding in GPU-ms per policy, where a serving part measured it (capacity: the mean over draws)."""
    rows = []
    for kind in ("capacity", "simulate"):
        for p in _own(summary[kind]):
            ms = {name: _padding_ms(p["policies"].get(name, {})) for name in (before, after)}
            if any(v is not None for v in ms.values()):
                rate = p.get("padding_at_per_s")  # capacity: read at its operating rate
                rows.append(
                    {"job": p["job"], "kind": kind, "rate_per_s": rate, "before": ms[before], "after": ms[after]}
                )
    return rows


def _padding_ms(policy: Json) -> float | None:
    value = policy.get("padded_prefill_ms")
    found = value["mean"] if isinstance(value, dict) else value
    return None if found is None else float(found)


def cannot_vouch(summary: Json) -> list[str]:
    """Sentences: what the evidence does not speak for, in the order a reviewer should read them."""
    subject, pair = summary["subject"], summary["pair"]
    out: list[str] = []
    if not subject["hardware"]:
        out.append(
            f"Recipe {subject['recipe']} declares no hardware: no evidence can be checked against the GPU it serves on."
        )
    for kind in ("capacity", "simulate", "replay", "sweep", "arms", "boots", "ttft", "numerics"):
        for p in summary[kind] or []:
            for why in p["source"]["foreign"]:
                out.append(f"{why}: its {p['source']['kind']} figures are shown below, not read as this recipe's.")
    for kind in ("capacity", "simulate", "replay"):
        for p in summary[kind] or []:
            for line in p.get("overloaded") or ():  # absent from a part that could not be read
                out.append(
                    f"job #{p['job']} ({kind}) was overloaded, {line}: its TTFT comparison is queueing, not the policy's effect."
                )
    for kind in ("capacity", "simulate", "replay"):
        for p in _own(summary[kind]):
            if p["source"]["hardware"] is None:
                out.append(
                    f"job #{p['job']}'s durations are {p['source']['execution']}: its {kind} figures speak for no GPU."
                )
            ran = p.get("policies") or p.get("replayed") or {}
            missing = [n for n in (pair["before"], pair["after"]) if n not in ran]
            if missing:
                out.append(
                    f"job #{p['job']} ({kind}) did not run {' or '.join(missing)}: it cannot compare {pair['label']}."
                )
    if not _own(summary["capacity"]):
        out.append("No capacity job of this recipe and hardware: capacity at the SLO is not established.")
    if not any(_own(summary[k]) for k in ("simulate", "capacity", "replay")):
        out.append("No serving evidence of this recipe and hardware: the TTFT delta under load is not established.")
    for p in _own(summary["ttft"]):
        if p["indicative"]:
            out.append(f"job #{p['job']}'s measured TTFT is indicative, not GPU timing: {p['why']}.")
    if not summary["ttft"]:
        out.append("No ttft job: end-to-end TTFT was not measured.")
    return out
