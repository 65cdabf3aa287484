"""The transformer shape the FLOP and memory formulas need, from a real architecture or inferred from N.

With only `--params` the attention FLOPs and the activation memory still depend on layers, hidden size and
heads, so we infer a typical shape: N ~= 12·L·h² (Kaplan et al. 2020, eq. 2.1) with the aspect ratio h ~= 128·L
that GPT-3 6.7B, Llama-2 7B (4096/32) and Llama-2 13B (5120/40) use. For 7B this gives L=33, h=4200 against
Llama-2-7B's 32 x 4096: close enough for a term that is 10-25% of the total.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gpuplan.estimating.architecture import Architecture


@dataclass(frozen=True)
class Shape:
    """The numbers the formulas use. `matmul_params` is Kaplan's N (blocks + output head), the 6N of 6·N·D."""

    layers: int
    hidden: int
    heads: int
    kv_dim: int
    intermediate: int
    vocab: int
    gated_mlp: bool
    matmul_params: int
    layer_params: int
    inferred: bool
    experts: int = 0  # MoE: routed experts per layer, 0 for a dense model
    experts_per_token: int = 0
    expert_params: int = 0  # all routed experts' parameters over all layers


@functools.lru_cache(maxsize=1024)
def shape_of(params: int, arch: Architecture | None) -> Shape:
    """The shape of `arch`, or a typical decoder shape for `params` parameters when there is no architecture.

    Memoised (a pure function of frozen values): `plan` asks for the same model's shape in every estimate and
    memory check it makes, and counting an architecture's parameters layer by layer each time was 6% of a plan."""
    if arch is not None:
        return Shape(
            layers=arch.num_layers, hidden=arch.hidden_size, heads=arch.num_heads, kv_dim=arch.kv_dim,
            intermediate=arch.active_intermediate(), vocab=arch.vocab_size, gated_mlp=arch.gated_mlp,
            matmul_params=arch.non_embedding_params(), layer_params=arch.layer_params(), inferred=False,
            experts=arch.num_experts, experts_per_token=arch.experts_per_token,
            expert_params=arch.routed_expert_params(),
        )
    layers = max(1, round((params / (12 * 128**2)) ** (1 / 3)))
    hidden = max(64, round((params / (12 * layers)) ** 0.5 / 64) * 64)
    heads = max(1, hidden // 128)
    return Shape(
        layers=layers, hidden=hidden, heads=heads, kv_dim=hidden, intermediate=4 * hidden, vocab=50_000,
        gated_mlp=False, matmul_params=params, layer_params=12 * hidden * hidden, inferred=True,
    )
