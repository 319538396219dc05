"""Model sizes and what a boot of them costs in memory, in plain Python (no torch).

Kept free of torch so the dashboard can validate a job (preset names, shape limits) without
importing it, and so a boot too large for the device is refused before anything is allocated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from scheduler_core.catalog import DEFAULT_PREFILL_CAPACITIES
from scheduler_core.errors import InvalidInput

DEFAULT_DECODE_ROWS: tuple[int, ...] = (1, 8, 32)
DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2}


@dataclass(frozen=True)
class ModelConfig:
    """A Llama-style decoder: RMSNorm, rotary positions, grouped-query attention, SwiGLU."""

    name: str
    layers: int
    width: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    context_tokens: int  # the model's context: the longest prompt a boot accepts
    decode_context: int  # cache length of each decode row
    dtype: str  # "float32" or "bfloat16"
    # The SDPA kernel each device type is pinned to (torch.nn.attention.sdpa_kernel): "efficient"
    # (memory-efficient, takes our additive mask in fp32 and bf16), "flash", "cudnn" or "math".
    attention_cuda: str = "efficient"
    attention_cpu: str = "flash"  # CPU has no memory-efficient kernel; its flash kernel takes masks
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def parameters(self) -> int:
        attention = (
            self.width * (self.heads + 2 * self.kv_heads) * self.head_dim + self.heads * self.head_dim * self.width
        )
        mlp = 3 * self.width * self.ffn
        return self.layers * (attention + mlp + 2 * self.width) + 2 * self.vocab * self.width + self.width

    def attention_backend(self, device_type: str) -> str:
        return self.attention_cuda if device_type == "cuda" else self.attention_cpu

    @property
    def kv_bytes_per_token(self) -> int:
        return self.layers * 2 * self.kv_heads * self.head_dim * DTYPE_BYTES[self.dtype]


# The shipped sizes, one row each in ModelConfig's field order. The last is a real model's shape
# (weights seeded random: timing does not depend on them). Llama-2-7B has no GQA, so its KV cache is
# 512 KiB a token: decode rows hold 1024 positions each, which keeps a boot with 32 rows near 50 GiB
# (fits an 80 GB card as well as a 141 GB H200).
# name, layers, width, heads, kv_heads, head_dim, ffn, vocab, context_tokens, decode_context, dtype
PRESETS: dict[str, ModelConfig] = {
    c.name: c
    for c in (
        ModelConfig("tiny", 2, 256, 4, 2, 64, 688, 2048, 4096, 256, "float32"),
        ModelConfig("small", 8, 2048, 16, 4, 128, 5632, 32000, 16384, 2048, "bfloat16"),
        ModelConfig("medium", 16, 4096, 32, 8, 128, 11008, 32000, 16384, 2048, "bfloat16"),
        ModelConfig("llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, 16384, 1024, "bfloat16"),
    )
}
# The same class with grouped-query attention (8 KV heads), a wider MLP and a 128k vocabulary.
PRESETS["llama-3-8b"] = dataclasses.replace(
    PRESETS["llama-2-7b"],
    name="llama-3-8b",
    kv_heads=8,
    ffn=14336,
    vocab=128256,
    decode_context=2048,
    rope_theta=500000.0,
)


def get_preset(name: object, field: str = "preset") -> ModelConfig:
    if not isinstance(name, str) or name not in PRESETS:
        raise InvalidInput(field, f"unknown preset {name!r} (expected one of {sorted(PRESETS)})")
    return PRESETS[name]


def default_shapes(
    capacities: Iterable[int] = DEFAULT_PREFILL_CAPACITIES,
    decode_rows: Iterable[int] = DEFAULT_DECODE_ROWS,
    graphs: str = "all",
) -> list[tuple[int, int]]:
    """A recipe's catalog shapes: solo prefill capacities, decode-only rows, and mixed shapes
    (the smallest capacity carrying each decode row count), as `graphs` selects."""
    caps = sorted(set(capacities))
    rows = sorted(set(decode_rows))
    shapes = [(c, 0) for c in caps]
    if graphs in ("prefill+decode", "all"):
        shapes += [(0, d) for d in rows]
    if graphs == "all":
        shapes += [(caps[0], d) for d in rows]
    return shapes


def cache_tokens(config: ModelConfig, shapes: Iterable[tuple[int, int]]) -> int:
    """The prefill cache length: the longest prompt plus room for the largest graph's padding,
    which is written past the real tokens and never attended to; rounded up to a multiple of 64
    so the attention mask's rows stay aligned for the memory-efficient CUDA kernel."""
    return -(-(config.context_tokens + max(p for p, _ in shapes)) // 64) * 64


def graph_bytes(config: ModelConfig, length: int, prefill: int, decode: int, device_type: str) -> int:
    """Peak activations of one (prefill, decode) step over a `length`-slot cache, attending all of it
    (an upper bound for any key bucket): the layer's activations, the additive mask and K/V repeated
    for grouped heads, and the scores only where the pinned kernel is `math` (it materialises them;
    the fused kernels keep a row's statistics only)."""
    size = DTYPE_BYTES[config.dtype]
    tokens = prefill + decode
    per_token = 4 * config.width + (config.heads + 2 * config.kv_heads) * config.head_dim + 3 * config.ffn
    keys = length * (1 if prefill else 0) + decode * config.decode_context
    attention = (prefill * length + 2 * config.heads * config.head_dim * keys) * size
    scores = config.heads * (prefill * length + decode * config.decode_context) * 4
    materialised = scores if config.attention_backend(device_type) == "math" else 0
    return tokens * per_token * size + attention + materialised + (1 + decode) * config.vocab * 4


def estimate_bytes(
    config: ModelConfig, shapes: list[tuple[int, int]], device_type: str = "cuda"
) -> tuple[int, tuple[int, int]]:
    """Bytes a boot needs (weights, caches, activations, with a 20 % margin) and its largest shape.
    On CUDA every graph is captured into a memory pool of its own (PyTorch lets graphs share a pool
    only when they replay in the order they were captured, and timing and plans replay them in any
    order), so every graph's activations stay reserved at once: their sum. On CPU steps run eagerly,
    one at a time: the largest shape's."""
    size = DTYPE_BYTES[config.dtype]
    length = cache_tokens(config, shapes)
    rows = max(d for _, d in shapes)
    fixed = config.parameters * size + config.kv_bytes_per_token * (length + rows * config.decode_context)
    each = {s: graph_bytes(config, length, *s, device_type) for s in shapes}
    peak_shape = max(shapes, key=lambda s: each[s])
    activations = sum(each.values()) if device_type == "cuda" else each[peak_shape]
    return int(1.2 * (fixed + activations)), peak_shape
