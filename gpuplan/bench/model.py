"""A GPT-style decoder in plain PyTorch, built from an `Architecture` with exactly its parameter count.

Why a model of our own rather than a library's: the bench must run the preset's real dimensions (GPT-2's
LayerNorm + biases + learned positions, Llama's RMSNorm + SwiGLU + rotary + grouped-query attention) with
nothing but torch installed, and its parameter count must equal `Architecture.param_count()` so the FLOPs the
estimator predicts and the FLOPs the bench counts refer to the same N (tests/unit/bench/test_bench_model.py checks
both).

Attention goes through `F.scaled_dot_product_attention`, the kernel real training code uses; see
gpuplan.bench.flops for how its FLOPs are counted on devices where the flop counter does not see it.

Imported only when a bench runs (torch is the optional `bench` extra).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gpuplan.estimating.architecture import Architecture


class RMSNorm(nn.Module):
    """Root-mean-square norm with a weight and no bias (Llama); written out so torch < 2.4 works too."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return norm.type_as(x) * self.weight


def _norm(arch: Architecture) -> nn.Module:
    return nn.LayerNorm(arch.hidden_size) if arch.layernorm else RMSNorm(arch.hidden_size)


def rotary_tables(seq_len: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of rotary position embeddings (RoFormer, Su et al. 2021), shape (seq_len, head_dim)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class Attention(nn.Module):
    """Causal self-attention with grouped-query support (num_kv_heads <= num_heads)."""

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        h, kv = arch.hidden_size, arch.kv_dim
        self.num_heads, self.num_kv_heads, self.head_dim = arch.num_heads, arch.num_kv_heads, arch.head_dim
        self.q = nn.Linear(h, h, bias=arch.biases)
        self.k = nn.Linear(h, kv, bias=arch.biases)
        self.v = nn.Linear(h, kv, bias=arch.biases)
        self.o = nn.Linear(h, h, bias=arch.biases)
        self.rotary = not arch.learned_positions

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        if rope is not None:
            cos, sin = rope[0][:s], rope[1][:s]
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if self.num_kv_heads != self.num_heads:
            # Repeat the shared K/V heads; the attention kernel then does the FLOPs of full multi-head attention.
            repeat = self.num_heads // self.num_kv_heads
            k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(out.transpose(1, 2).reshape(b, s, self.num_heads * self.head_dim))


class MLP(nn.Module):
    """GPT-2's two-matrix GELU MLP, or Llama's three-matrix SwiGLU."""

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        h, i = arch.hidden_size, arch.intermediate_size
        self.gated = arch.gated_mlp
        self.up = nn.Linear(h, i, bias=arch.biases)
        self.gate = nn.Linear(h, i, bias=arch.biases) if arch.gated_mlp else None
        self.down = nn.Linear(i, h, bias=arch.biases)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate is not None:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.norm1, self.attn = _norm(arch), Attention(arch)
        self.norm2, self.mlp = _norm(arch), MLP(arch)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), rope)
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    """Token ids (batch, seq) -> logits (batch, seq, vocab)."""

    def __init__(self, arch: Architecture, seq_len: int) -> None:
        super().__init__()
        if arch.learned_positions and seq_len > arch.max_seq_len:
            raise ValueError(f"seq-len {seq_len} exceeds the model's {arch.max_seq_len} learned positions")
        if arch.hidden_size % arch.num_heads or arch.num_heads % arch.num_kv_heads:
            raise ValueError("hidden size must split into the heads, and the heads into the key/value heads")
        self.arch = arch
        self.vocab_size = arch.vocab_size
        self.embed = nn.Embedding(arch.vocab_size, arch.hidden_size)
        self.positions = nn.Embedding(arch.max_seq_len, arch.hidden_size) if arch.learned_positions else None
        self.blocks = nn.ModuleList(Block(arch) for _ in range(arch.num_layers))
        self.norm = _norm(arch)
        self.head = None if arch.tied_embeddings else nn.Linear(arch.hidden_size, arch.vocab_size, bias=False)
        if arch.learned_positions:
            self.rope_cos = self.rope_sin = None
        else:
            cos, sin = rotary_tables(seq_len, arch.head_dim)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # GPT-2's initialisation: N(0, 0.02) weights, zero biases; keeps the synthetic loss finite in fp16.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        if self.positions is not None:
            x = x + self.positions(torch.arange(tokens.shape[1], device=tokens.device))
        rope = None if self.rope_cos is None else (self.rope_cos, self.rope_sin)
        for block in self.blocks:
            x = block(x, rope)
        x = self.norm(x)
        weight = self.embed.weight if self.head is None else self.head.weight
        return F.linear(x, weight)


def build_gpt(arch: Architecture, seq_len: int) -> GPT:
    """The GPT for `arch` (on the CPU, fp32 master weights; the runner moves it and picks the autocast dtype)."""
    return GPT(arch, seq_len)


def attention_flops_per_token(arch: Architecture, seq_len: int) -> float:
    """Forward + backward FLOPs of the attention score and value matmuls, per token.

    PaLM (Chowdhery et al. 2022, appendix B): 6N + 12·L·H·Q·T per token, where L layers, H heads, Q head dim,
    T sequence length. The 12·L·H·Q·T term is 2 matmuls x 2 FLOPs per multiply-add x 3 (forward + twice the
    forward in backward), over the full (not causally halved) score matrix, as the flop counter counts SDPA.
    """
    return 12.0 * arch.num_layers * arch.num_heads * arch.head_dim * seq_len


def count_parameters(module: nn.Module) -> int:
    """Trainable parameters, each shared tensor once (a tied embedding counts once)."""
    seen: set[int] = set()
    total = 0
    for param in module.parameters():
        if param.requires_grad and id(param) not in seen:
            seen.add(id(param))
            total += param.numel()
    return total
