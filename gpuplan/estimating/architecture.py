"""Transformer architectures: named presets with real dimensions, Hugging Face config.json parsing, and an
exact parameter count.

Shared by `estimate` (FLOPs and memory need layers, hidden size and heads, not just N), `bench` (builds a
GPT-style torch model of these dimensions) and the job spec's workload. Pure Python, no torch.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer's shape.

    `gated_mlp`: SwiGLU-style MLP with three matrices (Llama, Mistral) instead of two (GPT-2).
    `learned_positions`: GPT-2's absolute position embedding table (rotary models have none).
    `biases` / `layernorm`: GPT-2 has biases and LayerNorm (weight + bias); Llama has neither (RMSNorm).
    """

    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    max_seq_len: int
    gated_mlp: bool = False
    tied_embeddings: bool = True
    learned_positions: bool = True
    biases: bool = True
    layernorm: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def layer_params(self) -> int:
        """Parameters of one transformer block."""
        h, kv, i = self.hidden_size, self.kv_dim, self.intermediate_size
        attention = h * h + 2 * h * kv + h * h
        mlp = (3 if self.gated_mlp else 2) * h * i
        norms = 2 * (2 * h if self.layernorm else h)
        biases = (h + 2 * kv + h + (2 * i if self.gated_mlp else i) + h) if self.biases else 0
        return attention + mlp + norms + biases

    def embedding_params(self) -> int:
        """Token (and position) embeddings, the untied output head and the final norm."""
        h = self.hidden_size
        params = self.vocab_size * h
        if not self.tied_embeddings:
            params += self.vocab_size * h
        if self.learned_positions:
            params += self.max_seq_len * h
        params += 2 * h if self.layernorm else h
        return params

    def param_count(self) -> int:
        return self.num_layers * self.layer_params() + self.embedding_params()

    def non_embedding_params(self) -> int:
        """Parameters that do matmul work per token (Kaplan et al. 2020's N): blocks plus the output head."""
        return self.num_layers * self.layer_params() + self.vocab_size * self.hidden_size

    def with_layers(self, layers: int) -> Architecture:
        """The same model, shallower or deeper (bench's quick proxy)."""
        return replace(self, name=f"{self.name}[{layers}L]", num_layers=layers)

    def signature(self) -> str:
        """A stable identity of the shape, used to match bench records to estimates."""
        return (f"h{self.hidden_size}-l{self.num_layers}-a{self.num_heads}-kv{self.num_kv_heads}"
                f"-i{self.intermediate_size}-v{self.vocab_size}{'-glu' if self.gated_mlp else ''}")


def _llama(name: str, h: int, layers: int, heads: int, kv: int, inter: int, vocab: int, ctx: int) -> Architecture:
    return Architecture(name, h, layers, heads, kv, inter, vocab, ctx, gated_mlp=True, tied_embeddings=False,
                        learned_positions=False, biases=False, layernorm=False)


def _gpt2(name: str, h: int, layers: int, heads: int) -> Architecture:
    return Architecture(name, h, layers, heads, heads, 4 * h, 50257, 1024)


# Dimensions from each model's published config.json (Hugging Face Hub) or paper.
PRESETS: dict[str, Architecture] = {
    # A tiny GPT for quick checks and CPU benches.
    "gpt-tiny": Architecture("gpt-tiny", 128, 2, 4, 4, 512, 1024, 256),
    "gpt2": _gpt2("gpt2", 768, 12, 12),  # 124M
    "gpt2-medium": _gpt2("gpt2-medium", 1024, 24, 16),  # 355M
    "gpt2-large": _gpt2("gpt2-large", 1280, 36, 20),  # 774M
    "gpt2-xl": _gpt2("gpt2-xl", 1600, 48, 25),  # 1.56B
    "llama-2-7b": _llama("llama-2-7b", 4096, 32, 32, 32, 11008, 32000, 4096),
    "llama-2-13b": _llama("llama-2-13b", 5120, 40, 40, 40, 13824, 32000, 4096),
    "llama-2-70b": _llama("llama-2-70b", 8192, 80, 64, 8, 28672, 32000, 4096),
    "llama-3-8b": _llama("llama-3-8b", 4096, 32, 32, 8, 14336, 128256, 8192),
    "llama-3-70b": _llama("llama-3-70b", 8192, 80, 64, 8, 28672, 128256, 8192),
    "mistral-7b": _llama("mistral-7b", 4096, 32, 32, 8, 14336, 32000, 32768),
}


def preset(name: str) -> Architecture:
    """The preset called `name`; an unknown name raises ValueError listing the close matches."""
    key = name.strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    import difflib

    close = difflib.get_close_matches(key, PRESETS, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(PRESETS))}"
    raise ValueError(f"unknown model preset {name!r}{hint}")


def from_hf_config(config: dict[str, Any], name: str = "custom") -> Architecture:
    """An Architecture from a Hugging Face config.json (Llama-style names, or GPT-2's n_embd/n_layer/n_head)."""

    def first(*keys: str, default: Any = None) -> Any:
        for key in keys:
            if config.get(key) is not None:
                return config[key]
        if default is None:
            raise ValueError(f"model config lacks {' / '.join(keys)}")
        return default

    def whole(*keys: str, default: Any = None) -> int:
        """A size as a whole number: JSON allows NaN, Infinity, 1e999 and 4096.5, and int() of those either
        crashes (OverflowError, exit 1) or silently truncates."""
        value = first(*keys, default=default)
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value != int(value):
            raise ValueError(f"model config: {keys[0]} must be a whole number, not {value!r}")
        return int(value)

    hidden = whole("hidden_size", "n_embd", "d_model")
    layers = whole("num_hidden_layers", "n_layer", "num_layers")
    heads = whole("num_attention_heads", "n_head")
    kv_heads = whole("num_key_value_heads", default=heads)
    gpt2_style = "n_embd" in config or config.get("model_type") == "gpt2"
    intermediate = whole("intermediate_size", "n_inner", "ffn_dim", default=4 * hidden)
    vocab = whole("vocab_size")
    ctx = whole("max_position_embeddings", "n_positions", "n_ctx", default=2048)
    act = str(config.get("hidden_act", config.get("activation_function", "gelu"))).lower()
    gated = not gpt2_style and act in ("silu", "swiglu", "swish", "geglu")
    if hidden <= 0 or layers <= 0 or heads <= 0 or vocab <= 0 or hidden % heads:
        raise ValueError("model config has non-positive sizes or hidden_size not divisible by the heads")
    return Architecture(
        name=name, hidden_size=hidden, num_layers=layers, num_heads=heads, num_kv_heads=kv_heads,
        intermediate_size=intermediate, vocab_size=vocab, max_seq_len=ctx, gated_mlp=gated,
        tied_embeddings=bool(config.get("tie_word_embeddings", gpt2_style)),
        learned_positions=gpt2_style, biases=gpt2_style or bool(config.get("attention_bias", False)),
        layernorm=gpt2_style,
    )


MAX_CONFIG_BYTES = 4 * 1024 * 1024  # Hugging Face config.json files are a few KB


def load_hf_config(path: str | Path) -> Architecture:
    """Read a config.json file; raises ValueError with a user-facing message on a bad file."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:  # at most MAX_CONFIG_BYTES: /dev/zero never ends
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ValueError(f"model config {path} is over {MAX_CONFIG_BYTES // 1024 // 1024} MB; a config.json is a "
                             "few KB")
        config = json.loads(raw.decode("utf-8"))
    except FileNotFoundError as exc:
        raise ValueError(f"model config {path} does not exist") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"model config {path} is not valid JSON: {exc}") from exc
    except OSError as exc:  # a folder, a device, no permission
        raise ValueError(f"cannot read model config {path}: {exc.strerror or exc}") from exc
    if not isinstance(config, dict):
        raise ValueError(f"model config {path} must be a JSON object")
    return from_hf_config(config, name=path.stem if path.stem != "config" else path.parent.name or "custom")
