"""Does chunking change the answer? First-token logits of chunked prefills compared with each
other and with a one-shot (unchunked) prefill of the whole prompt, each comparison given a
verdict against the dtype's tolerance (docs/gpu_runner.md says why these bounds).

The model's logits have unit scale by construction (a final RMSNorm, then a head of std
width^-0.5): their standard deviation is about 1 and their maximum over the vocabulary 3 to 5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .device import shape_memory_guard
from .graphs import BootedModel
from .model import KVCache, Step

BITWISE = "bitwise identical"
WITHIN = "within tolerance"
NOT_BITWISE = "not bitwise identical"  # within tolerance, where bit-for-bit identity was required
DIFFERS = "differs beyond tolerance"


@dataclass(frozen=True)
class Tolerance:
    """How far two logit vectors may differ and still give the same answer: max |diff| at most
    `max_rel` of the reference's largest |logit| (elementwise ratios explode near zero), and greedy
    argmax and the top-k ids agreeing up to ties closer than that same absolute amount."""

    max_rel: float
    top_k: int = 5

    def as_dict(self) -> dict[str, Any]:
        return {"max_rel_diff": self.max_rel, "top_k": self.top_k}


TOLERANCES: dict[str, Tolerance] = {
    # fp32: reordered sums (another chunking, another kernel tile) move unit-scale logits by 1e-6
    # to 1e-5 through a few layers; 1e-4 of the largest (~4e-4) leaves headroom, while a real bug
    # (a pad seen, a wrong position) moves them by 0.1 or more.
    "float32": Tolerance(1e-4),
    # bf16: 8 significant bits, so rounding one logit near 4 alone is up to 0.016 (0.4%) and every
    # layer rounds the residual stream at 2^-9 relative; a 1% relative error in the last hidden
    # state, at the max of 32000 unit-scale logits, is about 0.05 (1.2%). 5% (~0.2) leaves about
    # 4x headroom and still fails the O(1) change a real bug makes.
    "bfloat16": Tolerance(5e-2),
}


def one_shot(boot: BootedModel, prompt: torch.Tensor) -> tuple[torch.Tensor, KVCache]:
    """The reference: the whole prompt in one eager step, no padding, on a cache of its own (the
    largest step a numerics job runs: out of memory in it is named as that shape's)."""
    with shape_memory_guard(boot.config, boot.device, (len(prompt), 0)):
        cache = KVCache(boot.config, boot.length, 1, boot.device)
        step = Step.allocate(len(prompt), 0, boot.device)
        step.tokens.copy_(prompt)
        return boot.model(step, cache)[0].float(), cache


def _top_k_agree(a: torch.Tensor, b: torch.Tensor, k: int, ties: float) -> bool:
    """Each of a's top-k ids is in b's top-k, or within `ties` of b's k-th largest (a near tie)."""
    kth = b.topk(k).values[-1]
    missing = set(a.topk(k).indices.tolist()) - set(b.topk(k).indices.tolist())
    return all(float(b[i]) >= float(kth) - ties for i in missing)


def compare(
    a: torch.Tensor, b: torch.Tensor, tolerance: Tolerance, *, bitwise_required: bool = False
) -> dict[str, Any]:
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


def passed(comparison: dict[str, Any]) -> bool:
    return comparison["verdict"] in (BITWISE, WITHIN)
