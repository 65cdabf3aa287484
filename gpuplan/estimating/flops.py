"""FLOPs per token, as the PaLM paper's MFU appendix counts them (Chowdhery et al. 2022, Appendix B).

Training a decoder costs 6·N FLOPs per token for the matmuls (2 forward + 4 backward) plus 12·L·H·Q·T for
self-attention (the QK^T and attention-times-V matmuls, H·Q = hidden size, T = sequence length), counted
without the causal-mask halving exactly as PaLM does, so the MFUs we cite and compute are comparable.
Activation recomputation re-runs the forward pass: the *hardware* FLOPs become 8·N + 16·L·H·Q·T while the
*model* FLOPs (what MFU is measured against) stay 6·N + 12·L·H·Q·T (Korthikanti et al. 2022, section 6).
LoRA freezes the base weights: the backward pass still propagates activation gradients (2·N) but computes no
weight gradients, so a token costs 4·N + 12·L·H·Q·T (adapters add a negligible 6·N_lora).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gpuplan.estimating.shape import Shape


@dataclass(frozen=True)
class FlopsPerToken:
    model: float  # the useful work, what MFU divides by
    hardware: float  # including recomputation
    dense: float  # the 6N (or 4N) part
    attention: float  # the 12·L·H·Q·T part


@functools.lru_cache(maxsize=256)
def training_flops_per_token(shape: Shape, seq_len: int, *, recompute: bool, lora: bool,
                             trainable_params: int = 0) -> FlopsPerToken:
    """Model and hardware FLOPs per trained token. Memoised, a pure function of frozen values: the step model asks
    it for every layout it times."""
    n = shape.matmul_params
    attention_fwd = 4.0 * shape.layers * shape.hidden * seq_len
    dense_fwd = 2.0 * n
    dense = 2.0 * dense_fwd + 6.0 * trainable_params if lora else 3.0 * dense_fwd
    attention = 3.0 * attention_fwd
    model = dense + attention
    hardware = model + (dense_fwd + attention_fwd if recompute else 0.0)
    return FlopsPerToken(model=model, hardware=hardware, dense=dense, attention=attention)


def forward_flops_per_token(shape: Shape, context: int) -> float:
    """One forward pass for one token attending to `context` tokens (inference prefill and decode)."""
    return 2.0 * shape.matmul_params + 4.0 * shape.layers * shape.hidden * context
