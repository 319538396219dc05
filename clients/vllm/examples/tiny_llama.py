"""A tiny Llama that vLLM serves on a CPU without weights (`load_format="dummy"`): only its
`config.json` is written. The shapes of STACK-NOTES' "vLLM on this machine"."""

from __future__ import annotations

import json
from pathlib import Path

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}
# what `LLM(...)` needs besides the model for this machine (2 cores, shared): see the README
ENGINE_ARGS = {
    "load_format": "dummy",
    "skip_tokenizer_init": True,
    "max_num_batched_tokens": 2048,
    "enable_chunked_prefill": True,
    "gpu_memory_utilization": 0.2,
    "max_model_len": 8192,
}


def write_model(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(CONFIG, indent=1))
    return directory
