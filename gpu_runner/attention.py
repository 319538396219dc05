"""Which attention kernel runs: pinned per preset and device type with
`torch.nn.attention.sdpa_kernel`, observed with the public profiler (`torch.profiler`: the ATen op a
step dispatches; "could not tell" where it records none, which is no failure), and a clear error
naming the kernel when it cannot run a step. Grouped key/value heads reach the kernel as they are
(`enable_gqa`) where the pinned kernel takes them, else repeated for their query group.

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

from .errors import AttentionBackendError

BACKENDS: dict[str, SDPBackend] = {
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}
# The fused ATen op each backend dispatches to, as the profiler names it (CPU's flash kernel has its
# own op); math has none, it decomposes into matmuls and a softmax.
FUSED_OPS: dict[str, str] = {
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
}
SOFTMAX_OPS = {"aten::_safe_softmax", "aten::_softmax", "aten::softmax"}
COULD_NOT_TELL = "could not tell"


@contextmanager
def pinned(name: str) -> Iterator[None]:
    """Only `name`'s kernel may run inside; SDPA raises rather than falling back to another."""
    with sdpa_kernel([BACKENDS[name]]):
        yield


def attend(
    name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, gqa: bool = False
) -> torch.Tensor:
    """Scaled dot-product attention on the pinned kernel, its refusal turned into an error naming it;
    `gqa`: k and v have fewer heads than q (`enable_gqa`). Out of memory is not a refusal: it
    propagates as it is, for the shape's guard to name."""
    grouped: dict[str, Any] = {"enable_gqa": True} if gqa else {}  # older torch lacks the keyword
    try:
        with pinned(name):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, **grouped)
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


def takes_grouped_heads(
    name: str, device: torch.device, dtype: torch.dtype, heads: int, kv_heads: int, dim: int
) -> bool:
    """Whether the pinned kernel runs grouped key/value heads as they are (`enable_gqa`, PyTorch
    2.5+), asked of it once on a small masked step of these head sizes; where it refuses (or the
    installed torch has no `enable_gqa`) they are repeated for their query group instead."""
    q = torch.zeros(1, heads, 64, dim, dtype=dtype, device=device)
    k = torch.zeros(1, kv_heads, 64, dim, dtype=dtype, device=device)
    mask = torch.zeros(64, 64, dtype=dtype, device=device)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a refusal warns with its reasons: the fallback is recorded instead
            with pinned(name):
                torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask, enable_gqa=True)
    except (TypeError, RuntimeError):
        return False
    return True


def observed_backends(step: Callable[[], Any]) -> list[str] | None:
    """The attention kernels one eager call of `step` dispatched to, in order of first use, read
    from the public profiler's CPU events; None where it recorded no attention op at all (an
    installed torch whose profiler names them otherwise): could not tell."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        names = [event.name for event in sorted(prof.events(), key=lambda e: e.time_range.start)]
    except (ImportError, AttributeError, RuntimeError):
        return None
    seen = [FUSED_OPS[n] for n in names if n in FUSED_OPS]
    if not seen and SOFTMAX_OPS.intersection(names):
        seen = ["math"]
    return list(dict.fromkeys(seen)) or None


def check_observed(pinned_name: str, observed: list[str] | None) -> str:
    """The verdict on the kernel that ran: as pinned, or could not tell; another kernel is an error."""
    if observed is None:
        return f"{COULD_NOT_TELL}: the profiler recorded no attention op (the kernel stays pinned)"
    if observed != [pinned_name]:
        raise AttentionBackendError(f"attention backend {pinned_name!r} was pinned but {observed} ran")
    return "ran as pinned"
