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
    # Mixture of experts (Mixtral, DeepSeekMoE, Qwen-MoE): `num_experts` routed experts of `moe_intermediate_size`
    # per MoE layer, `experts_per_token` of them active per token, `shared_experts` always active, and the first
    # `dense_layers` layers dense (DeepSeek's first_k_dense_replace). Memory counts every expert, FLOPs the active.
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    # head_dim when it is not hidden_size / num_heads (Gemma 2 9B/27B: 256, Mistral NeMo: 128); 0 = the quotient.
    explicit_head_dim: int = 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.hidden_size // self.num_heads

    @property
    def q_dim(self) -> int:
        """Width of the query (and attention output) projection: heads x head_dim."""
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def _attention_and_norms(self) -> int:
        h, kv, q = self.hidden_size, self.kv_dim, self.q_dim
        attention = h * q + 2 * h * kv + q * h
        norms = 2 * (2 * h if self.layernorm else h)
        return attention + norms + ((q + 2 * kv + h + h) if self.biases else 0)

    def _mlp(self, intermediate: int) -> int:
        matrices = (3 if self.gated_mlp else 2) * self.hidden_size * intermediate
        return matrices + ((2 * intermediate if self.gated_mlp else intermediate) if self.biases else 0)

    def dense_layer_params(self) -> int:
        """Parameters of one dense transformer block."""
        return self._attention_and_norms() + self._mlp(self.intermediate_size)

    def moe_layer_params(self, *, active: bool = False) -> int:
        """Parameters of one MoE block: every expert (memory), or the ones a token uses (`active`, FLOPs)."""
        experts = (self.experts_per_token if active else self.num_experts) + self.shared_experts
        router = self.hidden_size * self.num_experts
        return self._attention_and_norms() + router + experts * self._mlp(self.moe_intermediate_size)

    def _layer_sum(self, *, active: bool) -> int:
        if not self.is_moe:
            return self.num_layers * self.dense_layer_params()
        dense = min(self.dense_layers, self.num_layers)
        return dense * self.dense_layer_params() + (self.num_layers - dense) * self.moe_layer_params(active=active)

    def layer_params(self) -> int:
        """Parameters of one (average) transformer block, all experts counted."""
        return self._layer_sum(active=False) // self.num_layers

    def routed_expert_params(self) -> int:
        """Parameters of all routed experts over all MoE layers (0 for a dense model)."""
        if not self.is_moe:
            return 0
        moe_layers = self.num_layers - min(self.dense_layers, self.num_layers)
        return moe_layers * self.num_experts * self._mlp(self.moe_intermediate_size)

    def active_intermediate(self) -> int:
        """MLP width a token passes through (the active experts' together for MoE), for activation memory."""
        if not self.is_moe:
            return self.intermediate_size
        return (self.experts_per_token + self.shared_experts) * self.moe_intermediate_size

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
        return self._layer_sum(active=False) + self.embedding_params()

    def active_param_count(self) -> int:
        """Parameters a token uses (= param_count for a dense model)."""
        return self._layer_sum(active=True) + self.embedding_params()

    def non_embedding_params(self) -> int:
        """Parameters that do matmul work per token (Kaplan et al. 2020's N): blocks plus the output head; for MoE
        the active experts only (what the FLOPs count)."""
        return self._layer_sum(active=True) + self.vocab_size * self.hidden_size

    def with_layers(self, layers: int) -> Architecture:
        """The same model, shallower or deeper (bench's quick proxy)."""
        return replace(self, name=f"{self.name}[{layers}L]", num_layers=layers)

    def signature(self) -> str:
        """A stable identity of the shape, used to match bench records to estimates."""
        moe = f"-e{self.num_experts}k{self.experts_per_token}m{self.moe_intermediate_size}" if self.is_moe else ""
        return (f"h{self.hidden_size}-l{self.num_layers}-a{self.num_heads}-kv{self.num_kv_heads}"
                f"-i{self.intermediate_size}-v{self.vocab_size}{'-glu' if self.gated_mlp else ''}{moe}")


def _llama(name: str, h: int, layers: int, heads: int, kv: int, inter: int, vocab: int, ctx: int, *,
           tied: bool = False, head_dim: int = 0, **moe: int) -> Architecture:
    return Architecture(name, h, layers, heads, kv, inter, vocab, ctx, gated_mlp=True, tied_embeddings=tied,
                        learned_positions=False, biases=False, layernorm=False, explicit_head_dim=head_dim, **moe)


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
    # Llama 3.1 / 3.2 / 3.3 (meta-llama config.json on the Hub): 3.2 1B and 3B tie the embeddings.
    "llama-3.1-8b": _llama("llama-3.1-8b", 4096, 32, 32, 8, 14336, 128256, 131072),
    "llama-3.1-70b": _llama("llama-3.1-70b", 8192, 80, 64, 8, 28672, 128256, 131072),
    "llama-3.1-405b": _llama("llama-3.1-405b", 16384, 126, 128, 8, 53248, 128256, 131072),
    "llama-3.2-1b": _llama("llama-3.2-1b", 2048, 16, 32, 8, 8192, 128256, 131072, tied=True),
    "llama-3.2-3b": _llama("llama-3.2-3b", 3072, 28, 24, 8, 8192, 128256, 131072, tied=True),
    "llama-3.3-70b": _llama("llama-3.3-70b", 8192, 80, 64, 8, 28672, 128256, 131072),
    # Qwen 2.5 (Qwen/Qwen2.5-*/config.json): small ones tie the embeddings; q/k/v biases not counted (< 0.01%).
    "qwen2.5-0.5b": _llama("qwen2.5-0.5b", 896, 24, 14, 2, 4864, 151936, 32768, tied=True),
    "qwen2.5-1.5b": _llama("qwen2.5-1.5b", 1536, 28, 12, 2, 8960, 151936, 32768, tied=True),
    "qwen2.5-3b": _llama("qwen2.5-3b", 2048, 36, 16, 2, 11008, 151936, 32768, tied=True),
    "qwen2.5-7b": _llama("qwen2.5-7b", 3584, 28, 28, 4, 18944, 152064, 131072),
    "qwen2.5-14b": _llama("qwen2.5-14b", 5120, 48, 40, 8, 13824, 152064, 131072),
    "qwen2.5-32b": _llama("qwen2.5-32b", 5120, 64, 40, 8, 27648, 152064, 131072),
    "qwen2.5-72b": _llama("qwen2.5-72b", 8192, 80, 64, 8, 29568, 152064, 131072),
    # Mistral / Mixtral (mistralai/*/config.json).
    "mistral-nemo-12b": _llama("mistral-nemo-12b", 5120, 40, 32, 8, 14336, 131072, 131072, head_dim=128),
    "mixtral-8x7b": _llama("mixtral-8x7b", 4096, 32, 32, 8, 14336, 32000, 32768, num_experts=8,
                           experts_per_token=2, moe_intermediate_size=14336),
    "mixtral-8x22b": _llama("mixtral-8x22b", 6144, 56, 48, 8, 16384, 32768, 65536, num_experts=8,
                            experts_per_token=2, moe_intermediate_size=16384),
    # Gemma 2 (google/gemma-2-*/config.json): head_dim 256 (2B: 256 too, 8 heads x 256 = 2048 != 2304), GeGLU
    # MLP counted as gated, tied embeddings.
    "gemma-2-2b": _llama("gemma-2-2b", 2304, 26, 8, 4, 9216, 256000, 8192, tied=True, head_dim=256),
    "gemma-2-9b": _llama("gemma-2-9b", 3584, 42, 16, 8, 14336, 256000, 8192, tied=True, head_dim=256),
    "gemma-2-27b": _llama("gemma-2-27b", 4608, 46, 32, 16, 36864, 256000, 8192, tied=True, head_dim=128),
    # DeepSeekMoE 16B (deepseek-ai/deepseek-moe-16b-base/config.json): 64 routed experts of 1408, 6 active, 2 shared,
    # the first layer dense (intermediate 10944).
    "deepseek-moe-16b": _llama("deepseek-moe-16b", 2048, 28, 16, 16, 10944, 102400, 4096, num_experts=64,
                               experts_per_token=6, moe_intermediate_size=1408, shared_experts=2, dense_layers=1),
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
                or value != int(value) or value < 0:  # `num_local_experts: -8` is no count
            raise ValueError(f"model config: {keys[0]} must be a whole number, not {value!r}")
        return int(value)

    hidden = whole("hidden_size", "n_embd", "d_model")
    head_dim = whole("head_dim", default=0) if config.get("head_dim") is not None else 0
    layers = whole("num_hidden_layers", "n_layer", "num_layers")
    heads = whole("num_attention_heads", "n_head")
    kv_heads = whole("num_key_value_heads", default=heads)
    gpt2_style = "n_embd" in config or config.get("model_type") == "gpt2"
    intermediate = whole("intermediate_size", "n_inner", "ffn_dim", default=4 * hidden)
    vocab = whole("vocab_size")
    ctx = whole("max_position_embeddings", "n_positions", "n_ctx", default=2048)
    act = str(config.get("hidden_act", config.get("activation_function", "gelu"))).lower()
    gated = not gpt2_style and act in ("silu", "swiglu", "swish", "geglu")
    experts = whole("num_local_experts", "n_routed_experts", "num_experts", default=0) \
        if any(config.get(k) for k in ("num_local_experts", "n_routed_experts", "num_experts")) else 0
    moe: dict[str, int] = {}
    if experts:
        moe = {"num_experts": experts, "experts_per_token": whole("num_experts_per_tok", default=2),
               "moe_intermediate_size": whole("moe_intermediate_size", default=intermediate),
               "shared_experts": int(config.get("n_shared_experts") or 0),
               "dense_layers": int(config.get("first_k_dense_replace") or 0)}
    if hidden <= 0 or layers <= 0 or heads <= 0 or vocab <= 0 or (hidden % heads and not head_dim):
        raise ValueError("model config has non-positive sizes or hidden_size not divisible by the heads")
    return Architecture(
        name=name, hidden_size=hidden, num_layers=layers, num_heads=heads, num_kv_heads=kv_heads,
        intermediate_size=intermediate, vocab_size=vocab, max_seq_len=ctx, gated_mlp=gated,
        tied_embeddings=bool(config.get("tie_word_embeddings", gpt2_style)),
        learned_positions=gpt2_style, biases=gpt2_style or bool(config.get("attention_bias", False)),
        layernorm=gpt2_style, explicit_head_dim=head_dim if head_dim != hidden // heads else 0, **moe,
    )


MAX_CONFIG_BYTES = 4 * 1024 * 1024  # Hugging Face config.json files are a few KB


def load_hf_config(path: str | Path) -> Architecture:
    """Read a config.json (a file, a model directory or a Hub id in the local HF cache: hf_cache); raises
    ValueError with a user-facing message on a bad or missing file."""
    from gpuplan.estimating.hf_cache import resolve_config_path

    path = resolve_config_path(path)
    from gpuplan.readfile import check_nesting, read_bytes

    try:
        raw = read_bytes(path, "model config", MAX_CONFIG_BYTES)  # regular files only: /dev/zero never ends
        text = raw.decode("utf-8")
        check_nesting(text, f"model config {path}")  # json.loads recurses per level
        config = json.loads(text)
    except FileNotFoundError as exc:
        raise ValueError(f"model config {path} does not exist") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"model config {path} is not valid JSON: {exc}") from exc
    except OSError as exc:  # a folder, a device, no permission
        raise ValueError(f"cannot read model config {path}: {exc.strerror or exc}") from exc
    if not isinstance(config, dict):
        raise ValueError(f"model config {path} must be a JSON object")
    name = path.stem if path.stem != "config" else path.parent.name or "custom"
    if "snapshots" in path.parts:  # a cached Hub id: models--org--name/snapshots/<rev>/config.json
        name = path.parents[2].name.removeprefix("models--").replace("--", "/")
    return from_hf_config(config, name=name)
