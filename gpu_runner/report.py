"""Readable text for the GPU kinds' results: what the dashboard's job page shows above the JSON
(the CLI prints the JSON itself, for scripts)."""

from __future__ import annotations

from typing import Any

from scheduler_core.measured import HostLoadRecord, LogitsComparison

from .events import shape_label
from .provenance import ProvenanceRecord
from .published import table as published_table
from .results import CaptureResult, NumericsResult, TtftResult


def _provenance(p: ProvenanceRecord) -> str:
    cuda = f", CUDA {p['cuda']}" if p.get("cuda") else ""
    attention = f", attention {p['attention']['pinned']}" if p.get("attention") else ""
    return f"{p['device']}, {p['mode']}, {p['preset']} {p['dtype']}, torch {p['torch']}{cuda}{attention}"


def _gpu_state(state: dict[str, Any] | None) -> str:
    if not state:
        return "not read"
    throttle = state.get("throttle")
    return (
        f"SM {state.get('sm_mhz')} MHz (max {state.get('max_sm_mhz')}), {state.get('power_w')} of "
        f"{state.get('power_limit_w')} W, {state.get('temperature_c')} C, {state.get('pstate')}, "
        f"throttle {', '.join(throttle) if isinstance(throttle, list) else throttle}"
    )


def host_load_text(load: HostLoadRecord | None) -> str:
    """ "load average 7.90 on 2 cores before, 8.10 after" (the 1-minute average), or "host load not recorded"."""
    if not load or not load.get("before"):
        return "host load not recorded"
    before, after = load["before"], load.get("after")
    text = f"load average {before['load_average'][0]:.2f} on {before['cores']} cores before"
    return text + (f", {after['load_average'][0]:.2f} after" if after else "")


def capture_text(result: CaptureResult) -> str:
    drift = result["provenance"].get("drift")
    disturbed = f"; drifted: prefill {', '.join(map(str, drift['capacities']))} (load {drift['load']})" if drift else ""
    process = result["provenance"].get("pid")
    lines = [
        f"boot on {_provenance(result['provenance'])}{disturbed}"
        + (f"; process {process}" if process else "")
        + f"; {host_load_text(result['provenance'].get('host_load'))}",
        f"{'shape':<18} {'median ms':>10} {'p10':>9} {'p90':>9} {'p90/p10':>8} {'samples':>8}",
    ]
    state = result["provenance"].get("gpu_state")
    if state and (state.get("before") or state.get("after")):
        lines.insert(1, f"gpu before: {_gpu_state(state['before'])}; after: {_gpu_state(state['after'])}")
    for m in result["measurements"]:
        spread = m["p90_ms"] / m["p10_ms"] if m["p10_ms"] else float("inf")
        drifted = f"  (drifted: x{m['drift_slowdown']:.2f} its undisturbed median)" if m.get("drifted") else ""
        lines.append(
            f"{shape_label(m['prefill'], m['decode']):<18} {m['median_ms']:>10.3f} {m['p10_ms']:>9.3f} "
            f"{m['p90_ms']:>9.3f} {spread:>8.3f} {m['samples']:>8}{drifted}"
        )
    for row in result.get("boot_spread", []):
        lines.append(
            f"boots: {shape_label(row['prefill'], row['decode'])} medians max/min {row['max_over_min']:.3f}"
            + ("" if row.get("met", True) else "  (ABOVE the bound)")
        )
    if result.get("profile", {}).get("published"):  # a capture stored before profiles has none
        lines.append(f"profile {result['profile']['name']} against the published Llama-2-7B passes (Vidur):")
        lines += published_table(result["profile"]["published"])
    if "boot_spread_verdict" in result:
        v = result["boot_spread_verdict"]
        lines.append(
            f"boot-to-boot spread: worst {shape_label(v['worst']['prefill'], v['worst']['decode'])} "
            f"x{v['worst']['max_over_min']:.3f}; {v['target']}: {'met' if v['met'] else 'MISSED'}"
        )
    return "\n".join(lines)


def ttft_text(result: TtftResult) -> str:
    conditions = result.get("ttft_conditions")  # absent from results older than it
    lines = [
        f"on {_provenance(result['provenance'])}; planned with {result['planning_catalog_source']}'s catalog",
        f"{conditions['runs'] if conditions else '?'} runs per arm (TTFT: their median); "
        f"{host_load_text(conditions['host_load'] if conditions else None)}",
        "predicted: the launches at the planning catalog's durations; undisturbed: at this boot's "
        "medians timed without drift",
        f"{'prompt':>7} {'policy':<7} {'launches':>8} {'padded':>7} {'TTFT ms':>10} {'predicted':>10} "
        f"{'undisturbed':>11}  graphs",
    ]
    for arm in result["arms"]:
        lines.append(
            f"{arm['prompt_tokens']:>7} {arm['policy']:<7} {arm['launch_count']:>8} {arm['padded_tokens']:>7} "
            f"{arm['ttft_ms']:>10.2f} {arm['predicted_ms']:>10.2f} {arm['table_ms']:>11.2f}  "
            f"{','.join(map(str, arm['graphs']))}"
        )
    return "\n".join(lines)


def _compare(c: LogitsComparison) -> str:
    if c["bitwise_identical"]:
        return "bitwise identical"
    agree = "argmax and top-k agree" if c["argmax_agree"] and c["top_k_agree"] else "ARGMAX OR TOP-K DIFFERS"
    verdict = c["verdict"] if c["verdict"] == "within tolerance" else c["verdict"].upper()
    return f"{verdict} (max |diff| {c['max_abs_diff']:.3g}, {c['max_rel_diff']:.2g} of the largest; {agree})"


def numerics_text(result: NumericsResult) -> str:
    t = result["tolerance"]
    lines = [
        f"{result['prompt_tokens']} tokens on {_provenance(result['provenance'])}",
        f"tolerance ({t['dtype']}): max |diff| <= {t['max_rel_diff']:g} of the largest logit, argmax and "
        f"top-{t['top_k']} agree up to ties that close; the same chunking twice must be bitwise identical",
    ]
    for policy, chunking in result["chunkings"].items():
        lines.append(
            f"{policy:<5} chunks {','.join(map(str, chunking['graphs']))} (padding {chunking['padded_tokens']}); "
            f"vs one-shot: {_compare(result['vs_one_shot'][policy])}; "
            f"run twice: {_compare(result['same_chunking_twice'][policy])}"
        )
    for policy, cache in result.get("kv_vs_one_shot", {}).items():
        probe = result["causality"][policy]
        seen = (
            "nothing before it changed"
            if probe["first_changed_position"] is None
            else f"position {probe['first_changed_position']} CHANGED"
        )
        lines.append(
            f"{policy:<5} KV cache vs one-shot: {cache['verdict']} (worst layer {cache['worst_layer']}: "
            f"{cache['max_rel_diff']:.2g} of its largest, bound {t['cache_rel_diff']:g}); causality: token "
            f"{probe['altered_position']} altered, {seen} ({probe['verdict']})"
        )
    lines.append(f"cost vs rule: {_compare(result['cost_vs_rule'])}")
    lines.append(
        "reproducible: same chunking, same logits bit for bit"
        if result["reproducible"]
        else "NOT reproducible: a chunking gave different logits on a second run"
    )
    lines.append("numerics: pass" if result["ok"] else "numerics: FAIL (a verdict above is not a pass)")
    return "\n".join(lines)
