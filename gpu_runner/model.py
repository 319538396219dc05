"""A small Llama-style decoder (RMSNorm, rotary, grouped-query attention over a KV cache,
SwiGLU) with seeded random weights, written so every step has a fixed shape.

One step carries `prefill` tokens of one prompt (a chunk starting at a position held in a
tensor) plus `decode` rows that append one token each, and attends the first `keys` cache slots
(a bucket at least as long as the filled prefix, `key_bucket`). Shapes depend only on (prefill,
decode, keys), never on the data, so the same call can be captured once as a CUDA graph and
replayed; a chunk costs its own work, not the whole cache window's.

Padding: a chunk of capacity c holding w < c real tokens puts its pads at positions
start+w .. start+c-1. Their keys and values land past the real tokens, where causal masking
keeps every real query from seeing them, and the next chunk overwrites them. The cache is
therefore exact on [0, end of prompt) whatever the padding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from .attention import attend, takes_grouped_heads
from .presets import ModelConfig

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16}
KEY_ALIGN = 64  # key lengths stay multiples of 64: the memory-efficient CUDA kernel's mask rows stay aligned
BUCKET_STEP = 2048  # key buckets double up to this, then grow by it: at most 2x, or 2048 keys, attended in vain


def key_buckets(length: int) -> Iterator[int]:
    """The key lengths a prefill graph may attend, shortest first: 64, 128, ... 2048, 4096, 6144, ...,
    then the whole cache (`length`, a multiple of 64)."""
    keys = KEY_ALIGN
    while keys < length:
        yield keys
        keys = keys * 2 if keys < BUCKET_STEP else keys + BUCKET_STEP
    yield length


def key_bucket(length: int, end: int) -> int:
    """The shortest key bucket holding positions [0, end): a chunk ending (pads included) at `end`."""
    if end > length:
        raise ValueError(f"a chunk ending at {end} does not fit the {length}-slot cache")
    return next(k for k in key_buckets(length) if k >= end)


def kv_slots(chunk_positions: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """Cache slots a chunk's keys and values are written to: their positions (a seam the numerics
    tests replace with a one-slot offset, to see it caught)."""
    return chunk_positions


def visible(key_positions: torch.Tensor, chunk_positions: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """Which keys each chunk query attends: causal, up to its own position (the other seam: a
    one-token leak past it is what the numerics tests inject)."""
    return key_positions[None, :] <= chunk_positions[:, None]


class KVCache:
    """Keys and values, token-major: one prefill sequence of `length` positions, and `rows`
    decode rows of `config.decode_context` positions each."""

    def __init__(self, config: ModelConfig, length: int, rows: int, device: torch.device) -> None:
        dtype = DTYPES[config.dtype]
        self.length = length
        self.k = torch.zeros(config.layers, length, config.kv_heads, config.head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)
        shape = (config.layers, max(rows, 1), config.decode_context, config.kv_heads, config.head_dim)
        self.row_k = torch.zeros(shape, dtype=dtype, device=device)
        self.row_v = torch.zeros_like(self.row_k)

    def hand_off(self, row: int, tokens: int) -> None:
        """A prefilled prompt joins the decode batch: copy its first `tokens` positions to `row`."""
        self.row_k[:, row, :tokens] = self.k[:, :tokens]
        self.row_v[:, row, :tokens] = self.v[:, :tokens]


@dataclass
class Step:
    """Static inputs of one (prefill, decode) shape; a CUDA graph reads them at replay."""

    prefill: int
    decode: int
    keys: int  # cache slots the chunk attends (a key bucket; 0 without a chunk)
    tokens: torch.Tensor  # [prefill + decode] token ids: the chunk, then one per decode row
    start: torch.Tensor  # [1] position of the chunk's first token
    last: torch.Tensor  # [1] index in the chunk of its last real token (whose logits we sample)
    row_positions: torch.Tensor  # [decode] position each decode row appends at

    @classmethod
    def allocate(cls, prefill: int, decode: int, device: torch.device, keys: int) -> Step:
        long: dict[str, Any] = {"dtype": torch.long, "device": device}
        return cls(
            prefill,
            decode,
            keys if prefill else 0,
            torch.zeros(prefill + decode, **long),
            torch.zeros(1, **long),
            torch.full((1,), max(prefill - 1, 0), **long),
            torch.zeros(decode, **long),
        )


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def _additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask as an additive one, built once per step: SDPA would convert it in every layer."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, float("-inf"))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions, rotate-half form; cos/sin are [tokens, head_dim/2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Transformer(torch.nn.Module):
    """Weights drawn from a seeded generator on the target device: same seed, same model.
    `positions` bounds the rotary table: at least the prefill cache length. Attention runs on the
    kernel the preset pins for the device type (`attention.py`)."""

    cos: torch.Tensor  # rotary tables, registered as buffers
    sin: torch.Tensor

    def __init__(self, config: ModelConfig, device: torch.device, positions: int, seed: int = 0) -> None:
        super().__init__()
        self.config = config
        self.attention = config.attention_backend(device.type)
        dtype = DTYPES[config.dtype]
        self.groups = config.heads // config.kv_heads
        # Grouped heads reach the kernel as they are where it takes them; else repeated (a copy).
        self.grouped_heads = self.groups > 1 and takes_grouped_heads(
            self.attention, device, dtype, config.heads, config.kv_heads, config.head_dim
        )
        gen = torch.Generator(device=device).manual_seed(seed)

        def weight(*shape: int, std: float | None = None) -> torch.nn.Parameter:
            std = std if std is not None else shape[-1] ** -0.5
            w = torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).mul_(std)
            return torch.nn.Parameter(w.to(dtype), requires_grad=False)

        c = config
        self.embed = weight(c.vocab, c.width, std=1.0)
        self.qkv = torch.nn.ParameterList(
            weight((c.heads + 2 * c.kv_heads) * c.head_dim, c.width) for _ in range(c.layers)
        )
        self.out = torch.nn.ParameterList(weight(c.width, c.heads * c.head_dim) for _ in range(c.layers))
        self.gate_up = torch.nn.ParameterList(weight(2 * c.ffn, c.width) for _ in range(c.layers))
        self.down = torch.nn.ParameterList(weight(c.width, c.ffn) for _ in range(c.layers))
        ones = lambda: torch.nn.Parameter(torch.ones(c.width, dtype=dtype, device=device), requires_grad=False)
        self.attn_norm = torch.nn.ParameterList(ones() for _ in range(c.layers))
        self.mlp_norm = torch.nn.ParameterList(ones() for _ in range(c.layers))
        self.final_norm = ones()
        self.head = weight(c.vocab, c.width)
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, device=device, dtype=torch.float32) / c.head_dim))
        angles = torch.outer(torch.arange(max(positions, c.decode_context), device=device, dtype=torch.float32), inv)
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)

    @torch.no_grad()
    def forward(self, step: Step, cache: KVCache) -> torch.Tensor:
        """Logits of the chunk's last real token (if any) and of each decode row: [rows, vocab]."""
        c, p, d = self.config, step.prefill, step.decode
        chunk_positions = step.start + torch.arange(p, device=step.tokens.device)
        positions = torch.cat((chunk_positions, step.row_positions))
        cos, sin = self.cos.index_select(0, positions), self.sin.index_select(0, positions)
        attended = step.keys
        queries_mask = chunk_mask(attended, chunk_positions, step.start, cos.dtype)
        slots = kv_slots(chunk_positions, step.start)
        row_mask = _additive(
            torch.arange(c.decode_context, device=positions.device)[None, :] <= step.row_positions[:, None], cos.dtype
        )
        row_slots = torch.arange(d, device=positions.device) * c.decode_context + step.row_positions

        x = self.embed.index_select(0, step.tokens)
        for i in range(c.layers):
            h = _rms_norm(x, self.attn_norm[i], c.norm_eps)
            q, k, v = (h @ self.qkv[i].T).split(
                (c.heads * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim), -1
            )
            q = _rotate(q.view(-1, c.heads, c.head_dim), cos, sin)
            k = _rotate(k.view(-1, c.kv_heads, c.head_dim), cos, sin)
            v = v.view(-1, c.kv_heads, c.head_dim)
            parts = []
            if p:
                cache.k[i].index_copy_(0, slots, k[:p])
                cache.v[i].index_copy_(0, slots, v[:p])
                parts.append(
                    self._attend(
                        q[:p].transpose(0, 1)[None],
                        cache.k[i, :attended][None],
                        cache.v[i, :attended][None],
                        queries_mask,
                    )[0]
                    .transpose(0, 1)
                    .reshape(p, -1)
                )
            if d:
                keys, values = cache.row_k[i, :d], cache.row_v[i, :d]
                keys.view(-1, c.kv_heads, c.head_dim).index_copy_(0, row_slots, k[p:])
                values.view(-1, c.kv_heads, c.head_dim).index_copy_(0, row_slots, v[p:])
                parts.append(
                    self._attend(q[p:][:, :, None, :], keys, values, row_mask[:, None, None, :]).reshape(d, -1)
                )
            x = x + torch.cat(parts) @ self.out[i].T
            gate, up = (_rms_norm(x, self.mlp_norm[i], c.norm_eps) @ self.gate_up[i].T).chunk(2, -1)
            x = x + (F.silu(gate) * up) @ self.down[i].T

        rows = (
            torch.cat((step.last, torch.arange(p, p + d, device=positions.device)))
            if p
            else torch.arange(d, device=positions.device)
        )
        return _rms_norm(x.index_select(0, rows), self.final_norm, c.norm_eps) @ self.head.T

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return grouped_attention(self.attention, self.groups, q, k, v, mask, self.grouped_heads)

    @property
    def kv_heads_mode(self) -> str:
        """How key/value heads reach the kernel, as a boot records it."""
        if self.groups == 1:
            return "as they are (not grouped)"
        return (
            "grouped (enable_gqa)" if self.grouped_heads else f"repeated x{self.groups} (the kernel refused enable_gqa)"
        )


def grouped_attention(
    kernel: str,
    groups: int,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor,
    grouped_heads: bool = False,
) -> torch.Tensor:
    """One layer's attention as a step runs it. q: [batch, heads, queries, dim]; k, v token-major
    [batch, keys, kv_heads, dim], viewed head-major (no copy). Only where heads are grouped and the
    kernel cannot take them so (`grouped_heads` false) are key/value heads repeated for their group."""
    k, v = k.transpose(1, 2), v.transpose(1, 2)
    if groups > 1 and not grouped_heads:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    return attend(kernel, q, k, v, mask, gqa=groups > 1 and grouped_heads)


def chunk_mask(keys: int, chunk_positions: torch.Tensor, start: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The additive mask of a chunk (its queries at `chunk_positions`) over the first `keys` slots."""
    return _additive(visible(torch.arange(keys, device=chunk_positions.device), chunk_positions, start), dtype)
