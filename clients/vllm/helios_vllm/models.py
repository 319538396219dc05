"""The models vLLM serves here: a directory holding only a Llama `config.json`, weights drawn at
load (`--load-format dummy`), no tokenizer (prompts travel as token ids). No weights are
downloaded: the step times depend on the shapes, not on the values.

`tiny` is small enough for a CPU; `llama-2-7b` and `llama-3-8b` are the real models' shapes, for
a GPU host (bfloat16, 16 and 17 GB of weights drawn in place). One module for both sides: the
examples and the overhead bench import it inside vLLM's virtualenv, `vllm_loop` in the product's
(standard library only: it never imports vLLM).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "initializer_range": 0.02,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "use_cache": True,
}

SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "vocab_size": 32000,
        "max_position_embeddings": 8192,
        "rope_theta": 10000.0,
    },
    "llama-2-7b": {
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
    },
    "llama-3-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
    },
}


# What `LLM(...)` needs besides the model on a small shared CPU host (vllm_loop.server passes the
# same to `vllm serve`): vLLM's CPU backend reserves `gpu_memory_utilization` of the host's RAM.
CPU_ENGINE_ARGS: dict[str, Any] = {
    "load_format": "dummy",
    "skip_tokenizer_init": True,
    "max_num_batched_tokens": 2048,
    "enable_chunked_prefill": True,
    "gpu_memory_utilization": 0.2,
    "max_model_len": 8192,
}


def config(shape: str) -> dict[str, Any]:
    if shape not in SHAPES:
        raise ValueError(f"unknown model shape {shape!r} (expected one of {sorted(SHAPES)})")
    return {**_LLAMA, **SHAPES[shape]}


def write(directory: Path, shape: str) -> Path:
    """The model directory for `shape` (its config.json, rewritten only when it changed)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.json"
    text = json.dumps(config(shape), indent=2, sort_keys=True) + "\n"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return directory


def max_context(shape: str) -> int:
    return int(config(shape)["max_position_embeddings"])


def vocab(shape: str) -> int:
    return int(config(shape)["vocab_size"])
