"""Does chunking change the answer? First-token logits of chunked prefills compared with each
other and with a one-shot (unchunked) prefill of the whole prompt."""

from __future__ import annotations

from typing import Any

import torch

from .graphs import Boot
from .model import KVCache, Step


def one_shot(boot: Boot, prompt: torch.Tensor) -> tuple[torch.Tensor, KVCache]:
    """The reference: the whole prompt in one eager step, no padding, on a cache of its own."""
    cache = KVCache(boot.config, boot.length, 1, boot.device)
    step = Step.allocate(len(prompt), 0, boot.device)
    step.tokens.copy_(prompt)
    return boot.model(step, cache)[0].float(), cache


# The relative difference between two chunkings' logits accepted as rounding, per model dtype:
# float32 accumulates in a different order per chunking; bf16 keeps 8 mantissa bits.
TOLERANCE: dict[str, float] = {"float32": 1e-4, "bfloat16": 2e-2}


def compare(a: torch.Tensor, b: torch.Tensor) -> dict[str, Any]:
    """Max absolute logit difference, the same relative to the largest logit of `b` (elementwise
    ratios explode near zero), whether greedy sampling agrees, and bitwise identity."""
    diff = float((a - b).abs().max())
    return {
        "max_abs_diff": diff,
        "max_rel_diff": diff / max(float(b.abs().max()), 1e-30),
        "argmax_agree": int(a.argmax()) == int(b.argmax()),
        "argmax": [int(a.argmax()), int(b.argmax())],
        "bitwise_identical": bool(torch.equal(a, b)),
    }
