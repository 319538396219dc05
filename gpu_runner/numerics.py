"""Does chunking change the answer? First-token logits of chunked prefills compared with each
other and with a one-shot (unchunked) prefill of the whole prompt, each comparison given a
verdict against the dtype's tolerance (docs/gpu_runner.md says why these bounds).

The model's logits have unit scale by construction (a final RMSNorm, then a head of std
width^-0.5): their standard deviation is about 1 and their maximum over the vocabulary 3 to 5.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from scheduler_core.catalog import Catalog
from scheduler_core.measured import LogitsComparison
from scheduler_core.planner import Plan, plan
from scheduler_core.policies import PR22_POLICIES
from scheduler_core.request import Request

from .device import shape_memory_guard
from .execute import execute, prompt_tokens
from .graphs import BootedModel
from .model import KEY_ALIGN, KVCache, Step

BITWISE = "bitwise identical"
WITHIN = "within tolerance"
NOT_BITWISE = "not bitwise identical"  # within tolerance, where bit-for-bit identity was required
DIFFERS = "differs beyond tolerance"
SEES_LATER = "sees a later token"  # the causality probe: an earlier position changed with a later token


@dataclass(frozen=True)
class Tolerance:
    """How far two logit vectors may differ and still give the same answer: max |diff| at most
    `max_rel` of the reference's largest |logit| (elementwise ratios explode near zero), and greedy
    argmax and the top-k ids agreeing up to ties closer than that same absolute amount. The KV
    cache over the prompt, layer by layer, within `cache_rel` of that layer's largest |key| or
    |value|: a bug at a chunk boundary moves some positions' keys by O(1) there, while the logits,
    averaged over thousands of positions, may move by a percent only."""

    max_rel: float
    cache_rel: float
    top_k: int = 5

    def as_dict(self) -> dict[str, Any]:
        return {"max_rel_diff": self.max_rel, "cache_rel_diff": self.cache_rel, "top_k": self.top_k}


TOLERANCES: dict[str, Tolerance] = {
    # fp32: reordered sums (another chunking, another kernel tile) move unit-scale logits by 1e-6
    # to 1e-5 through a few layers; 1e-4 of the largest (~4e-4) leaves headroom, while a real bug
    # (a pad seen, a wrong position) moves them by 0.1 or more.
    "float32": Tolerance(1e-4, cache_rel=1e-4),
    # bf16: 8 significant bits, so rounding one logit near 4 alone is up to 0.016 (0.4%) and every
    # layer rounds the residual stream at 2^-9 relative; a 1% relative error in the last hidden
    # state, at the max of 32000 unit-scale logits, is about 0.05 (1.2%). 5% (~0.2) leaves about
    # 4x headroom and still fails the O(1) change a real bug makes. The cache, layer by layer, gets
    # the same bound: bf16 against fp32 on CPU differs by 0.5-0.8 % per position there, while a key
    # written one slot off is off by more than 100 % of the layer's largest key (logits: 0.7 %).
    "bfloat16": Tolerance(5e-2, cache_rel=5e-2),
}


@dataclass(frozen=True)
class CacheSnapshot:
    """A cache's keys and values over a prompt's positions, copied: [layers, tokens, kv_heads, dim]."""

    k: torch.Tensor
    v: torch.Tensor


def snapshot(cache: KVCache, tokens: int) -> CacheSnapshot:
    return CacheSnapshot(cache.k[:, :tokens].clone(), cache.v[:, :tokens].clone())


def one_shot(boot: BootedModel, prompt: torch.Tensor) -> tuple[torch.Tensor, CacheSnapshot]:
    """The reference: the whole prompt in one eager step, no padding, written into the boot's own
    cache (no second cache beside it: on a 7B preset that would be 10 GiB more) and copied out over
    the prompt's positions only. It is the largest step a numerics job runs: out of memory in it is
    named as that shape's. The boot's cache holds the reference prefill afterwards."""
    with shape_memory_guard(boot.config, boot.device, (len(prompt), 0)):
        step = Step.allocate(len(prompt), 0, boot.device, -(-len(prompt) // KEY_ALIGN) * KEY_ALIGN)
        step.tokens.copy_(prompt)
        logits = boot.model(step, boot.cache)[0].float()
        return logits, snapshot(boot.cache, len(prompt))


def _top_k_agree(a: torch.Tensor, b: torch.Tensor, k: int, ties: float) -> bool:
    """Each of a's top-k ids is in b's top-k, or within `ties` of b's k-th largest (a near tie)."""
    kth = b.topk(k).values[-1]
    missing = set(a.topk(k).indices.tolist()) - set(b.topk(k).indices.tolist())
    return all(float(b[i]) >= float(kth) - ties for i in missing)


def compare(
    a: torch.Tensor, b: torch.Tensor, tolerance: Tolerance, *, bitwise_required: bool = False
) -> LogitsComparison:
    """Logits `a` against reference `b`: max absolute and relative difference, argmax and top-k
    agreement (up to near ties), bitwise identity, and the verdict."""
    bitwise = bool(torch.equal(a, b))
    max_abs = float((a - b).abs().max())
    bound = tolerance.max_rel * float(b.abs().max())
    i, j = int(a.argmax()), int(b.argmax())
    argmax_agree = i == j or float(b[j]) - float(b[i]) <= bound
    top_k_agree = _top_k_agree(a, b, tolerance.top_k, bound)
    if bitwise:
        verdict = BITWISE
    elif not max_abs <= bound or not argmax_agree or not top_k_agree:  # NaN fails too
        verdict = DIFFERS
    else:
        verdict = NOT_BITWISE if bitwise_required else WITHIN
    return {
        "max_abs_diff": max_abs,
        "max_rel_diff": max_abs / max(float(b.abs().max()), 1e-30),
        "argmax": [i, j],
        "argmax_agree": argmax_agree,
        "top_k_agree": top_k_agree,
        "bitwise_identical": bitwise,
        "bitwise_required": bitwise_required,
        "verdict": verdict,
    }


def passed(comparison: Mapping[str, Any]) -> bool:
    return comparison["verdict"] in (BITWISE, WITHIN)


def compare_caches(a: KVCache, b: CacheSnapshot, tokens: int, tolerance: Tolerance) -> dict[str, Any]:
    """Cache `a` against reference `b` over positions [0, tokens), layer by layer: the keys' and
    values' max |diff| over that layer's largest |key| (|value|), the worst layer, the verdict."""
    layers = []
    for i in range(a.k.shape[0]):
        row: dict[str, Any] = {"layer": i}
        for name, x, y in (("k", a.k[i, :tokens], b.k[i, :tokens]), ("v", a.v[i, :tokens], b.v[i, :tokens])):
            ref = y.float()
            row[f"{name}_rel_diff"] = float((x.float() - ref).abs().max()) / max(float(ref.abs().max()), 1e-30)
        layers.append(row)
    worst = max(layers, key=lambda r: max(r["k_rel_diff"], r["v_rel_diff"]))
    worst_rel = max(worst["k_rel_diff"], worst["v_rel_diff"])
    bitwise = bool(torch.equal(a.k[:, :tokens], b.k[:, :tokens]) and torch.equal(a.v[:, :tokens], b.v[:, :tokens]))
    verdict = BITWISE if bitwise else WITHIN if worst_rel <= tolerance.cache_rel else DIFFERS  # NaN: differs
    return {"layers": layers, "worst_layer": worst["layer"], "max_rel_diff": worst_rel, "verdict": verdict}


def compare_chunkings(
    boot: BootedModel, planning: Catalog, tokens: int, seed: int, advance: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """One seeded prompt under the cost and rule chunkings (planned with `planning`), each run
    twice, against a one-shot prefill: first-token logits and the KV cache over the prompt; and a
    causality probe of each chunking."""
    tolerance = TOLERANCES[boot.config.dtype]
    prompt = prompt_tokens(boot, tokens, seed)
    reference, reference_cache = one_shot(boot, prompt)
    advance("one-shot reference")
    chunkings, logits, repeat, caches, causal = {}, {}, {}, {}, {}
    for policy in PR22_POLICIES:
        chosen = plan(policy, planning, Request(tokens))
        first = execute(boot, chosen, prompt)
        caches[policy] = compare_caches(boot.cache, reference_cache, tokens, tolerance)  # before the rerun
        second = execute(boot, chosen, prompt)
        causal[policy] = causality(boot, chosen, prompt)
        chunkings[policy] = {
            "graphs": list(chosen.graphs),
            "chunks": [[l.start, l.end] for l in chosen.launches],
            "padded_tokens": chosen.padded_tokens,
        }
        logits[policy] = first.logits
        repeat[policy] = compare(second.logits, first.logits, tolerance, bitwise_required=True)
        advance(f"{policy}: {len(chosen.launches)} launches")
    vs_one_shot = {p: compare(logits[p], reference, tolerance) for p in logits}
    cost_vs_rule = compare(logits["rule"], logits["cost"], tolerance)
    comparisons = [*vs_one_shot.values(), cost_vs_rule, *repeat.values(), *caches.values(), *causal.values()]
    return {
        "tolerance": {"dtype": boot.config.dtype, **tolerance.as_dict()},
        "chunkings": chunkings,
        "vs_one_shot": vs_one_shot,
        "kv_vs_one_shot": caches,
        "causality": causal,
        "cost_vs_rule": cost_vs_rule,
        "same_chunking_twice": repeat,
        "reproducible": all(r["bitwise_identical"] for r in repeat.values()),
        "ok": all(passed(c) for c in comparisons),
    }


def causality(boot: BootedModel, chosen: Plan, prompt: torch.Tensor) -> dict[str, Any]:
    """Change one token inside the last chunk (not its first, so the position before it is in the
    same step) and run the plan again: every cache entry before that token must stay bit for bit
    the same. Exact, not a tolerance: rows before it never read it (GEMM rows are independent, a
    masked key weighs exactly 0), so a mask that lets a query see one token ahead shows here
    however little it moves the logits. Leaves the cache holding `prompt`'s prefill."""
    last = chosen.launches[-1]
    at = last.start + max(1, (last.end - last.start) // 2) if last.end - last.start > 1 else last.start
    execute(boot, chosen, prompt)
    keys, values = boot.cache.k[:, :at].clone(), boot.cache.v[:, :at].clone()
    altered = prompt.clone()
    altered[at] = (prompt[at] + 1) % boot.config.vocab
    execute(boot, chosen, altered)
    same = (boot.cache.k[:, :at] == keys).flatten(2).all(-1) & (boot.cache.v[:, :at] == values).flatten(2).all(-1)
    changed = (~same).any(0).nonzero()
    execute(boot, chosen, prompt)
    return {
        "altered_position": at,
        "first_changed_position": int(changed[0]) if len(changed) else None,
        "verdict": BITWISE if not len(changed) else SEES_LATER,
    }
