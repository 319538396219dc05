"""Which attention kernel runs: pinned per preset and device type with
`torch.nn.attention.sdpa_kernel`, observed from the ATen op a step dispatches, and a clear error
naming the kernel when it cannot run a step.

Pinning matters on a GPU: left free, PyTorch may pick cuDNN attention for bf16 on recent GPUs,
which has known problems with additive `-inf` masks, and nothing would record the choice.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

from .errors import AttentionBackendError

BACKENDS: dict[str, SDPBackend] = {
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}
# The fused ATen op each backend dispatches to (CPU's flash kernel has its own op); math has none,
# it decomposes into matmuls and a softmax.
FUSED_OPS: dict[str, str] = {
    "aten._scaled_dot_product_efficient_attention.default": "efficient",
    "aten._scaled_dot_product_flash_attention.default": "flash",
    "aten._scaled_dot_product_flash_attention_for_cpu.default": "flash",
    "aten._scaled_dot_product_cudnn_attention.default": "cudnn",
}
SOFTMAX_OPS = {"aten._safe_softmax.default", "aten._softmax.default"}


@contextmanager
def pinned(name: str) -> Iterator[None]:
    """Only `name`'s kernel may run inside; SDPA raises rather than falling back to another."""
    with sdpa_kernel([BACKENDS[name]]):
        yield


def attend(name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scaled dot-product attention on the pinned kernel, its refusal turned into an error naming it.
    Out of memory is not a refusal: it propagates as it is, for the shape's guard to name."""
    try:
        with pinned(name):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    except torch.OutOfMemoryError:
        raise
    except RuntimeError as exc:
        raise AttentionBackendError(
            f"attention backend {name!r} cannot run this step (query {tuple(q.shape)}, keys {tuple(k.shape)}, "
            f"{q.dtype}, additive mask {tuple(mask.shape)} on {q.device}); pin another in the preset "
            f"(attention_{q.device.type}). torch: {str(exc).splitlines()[0]}{_reasons(name, q, k, v, mask)}"
        ) from exc


def _reasons(name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> str:
    """Why SDPA refused the kernel, as it says in warnings (on CUDA: `Memory efficient kernel not used
    because: ...`), collected by calling it once more; the happy path pays nothing for this."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with pinned(name):
                torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        except RuntimeError:
            pass
    said = list(dict.fromkeys(str(w.message).strip() for w in caught))
    return "".join(f"; {line}" for line in said)


class _OpLog(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def observed_backends(step: Callable[[], Any]) -> list[str]:
    """The attention kernels one eager call of `step` dispatched to, in order of first use."""
    with _OpLog() as log:
        step()
    seen = [FUSED_OPS[op] for op in log.ops if op in FUSED_OPS]
    if not seen and SOFTMAX_OPS.intersection(log.ops):
        seen = ["math"]
    return list(dict.fromkeys(seen))


def check_observed(pinned_name: str, observed: list[str]) -> None:
    if observed != [pinned_name]:
        raise AttentionBackendError(f"attention backend {pinned_name!r} was pinned but {observed} ran")
