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


def compare(a: torch.Tensor, b: torch.Tensor) -> dict[str, Any]:
    """Max absolute logit difference, whether greedy sampling agrees, and bitwise identity."""
    return {
        "max_abs_diff": float((a - b).abs().max()),
        "argmax_agree": int(a.argmax()) == int(b.argmax()),
        "argmax": [int(a.argmax()), int(b.argmax())],
        "bitwise_identical": bool(torch.equal(a, b)),
    }
