"""Issue 33, item 2: activation memory checked against what a real torch layer saves, and layouts the published
record says ran are never refused.

The byte counts of gpuplan/estimating/memory.py are measured on a whole pre-norm decoder layer run on CPU: every
tensor autograd saves for the backward pass (saved_tensors_hooks), weights left out. LayerNorm also keeps its mean
and rstd per token (on CPU in the activation dtype, 2 + 2 bytes; CUDA keeps them in fp32); the formula leaves those
few bytes out, as Korthikanti et al. 2022 do, so the test adds them by hand.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuplan.estimating import memory
from gpuplan.estimating.architecture import Architecture
from gpuplan.estimating.shape import shape_of

from support.clihelp import run_cli

torch = pytest.importorskip("torch")
functional = torch.nn.functional
BATCH, HEADS, KV_HEADS, SEQ, HEAD_DIM, INTER = 2, 4, 2, 256, 32, 352
HIDDEN = HEADS * HEAD_DIM
NORM_STATS = 2 * (2 + 2)  # two LayerNorms, bf16 mean and rstd per token on CPU


class FusedSwiGLU(torch.autograd.Function):  # type: ignore[misc]
    """Megatron-Core's SwiGLUFunction (megatron/core/fusions/fused_bias_swiglu.py): saves only its input."""

    @staticmethod
    def forward(ctx, y):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(y)
        gate, up = torch.chunk(y, 2, -1)
        return functional.silu(gate) * up

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        (y,) = ctx.saved_tensors
        gate, up = torch.chunk(y, 2, -1)
        sig = torch.sigmoid(gate)
        return torch.cat((grad * sig * (1 + gate * (1 - sig)) * up, grad * functional.silu(gate)), -1)


def _saved_bytes(mlp: str) -> int:
    """Bytes autograd saves for one layer: LayerNorm, GQA attention through SDPA, then a GELU, SwiGLU or fused
    SwiGLU MLP, each with its residual."""
    torch.manual_seed(0)

    def weight(rows: int, cols: int) -> torch.Tensor:
        return (torch.randn(rows, cols, dtype=torch.bfloat16) * 0.02).requires_grad_()

    wq, wo = weight(HIDDEN, HIDDEN), weight(HIDDEN, HIDDEN)
    wk, wv = weight(KV_HEADS * HEAD_DIM, HIDDEN), weight(KV_HEADS * HEAD_DIM, HIDDEN)
    up_rows = 2 * INTER if mlp != "gelu" else INTER
    w1, w2 = weight(up_rows, HIDDEN), weight(HIDDEN, INTER)
    constants = {t.untyped_storage().data_ptr() for t in (wq, wo, wk, wv, w1, w2)}
    activation: Callable[[torch.Tensor], torch.Tensor] = {
        "gelu": functional.gelu,
        "swiglu": lambda y: functional.silu(y[..., :INTER]) * y[..., INTER:],
        "fused": FusedSwiGLU.apply,
    }[mlp]

    def layer(x: torch.Tensor) -> torch.Tensor:
        h = functional.layer_norm(x, (HIDDEN,))
        q = functional.linear(h, wq).view(BATCH, SEQ, HEADS, HEAD_DIM).transpose(1, 2)
        k = functional.linear(h, wk).view(BATCH, SEQ, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = functional.linear(h, wv).view(BATCH, SEQ, KV_HEADS, HEAD_DIM).transpose(1, 2)
        o = functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + functional.linear(o.transpose(1, 2).reshape(BATCH, SEQ, HIDDEN), wo)
        h = functional.layer_norm(x, (HIDDEN,))
        return x + functional.linear(activation(functional.linear(h, w1)), w2)

    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in constants:
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    x = torch.randn(BATCH, SEQ, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x).sum().backward()
    return sum(saved.values())


@pytest.mark.parametrize(("mlp", "gated", "fused"), [("gelu", False, False), ("swiglu", True, False),
                                                     ("fused", True, True)])
def test_layer_formula_is_what_torch_saves(mlp: str, gated: bool, fused: bool) -> None:
    """GELU keeps h + 2·i a token, eager SwiGLU h + 4·i, Megatron's fused SwiGLU h + 3·i; attention and norms as
    memory.attention_activation_bytes says."""
    shape = shape_of(0, Architecture("t", HIDDEN, 1, HEADS, KV_HEADS, INTER, 1000, SEQ, gated_mlp=gated))
    tokens = BATCH * SEQ
    expected = memory.layer_activation_bytes(shape, tokens, "bf16", seq_len=SEQ, fused_swiglu=fused)
    assert _saved_bytes(mlp) == expected + NORM_STATS * tokens


def test_fused_swiglu_saves_one_intermediate_fewer() -> None:
    shape = shape_of(0, Architecture("t", HIDDEN, 1, HEADS, KV_HEADS, INTER, 1000, SEQ, gated_mlp=True))
    eager = memory.layer_activation_bytes(shape, 1, "bf16")
    assert eager - memory.layer_activation_bytes(shape, 1, "bf16", fused_swiglu=True) == 2 * INTER


def test_published_layouts_that_ran_are_not_refused() -> None:
    """The FlashAttention authors' GPT-3 2.7B (training/configs/experiment/pile/gpt3-2.7B-flash.yaml at edc7698:
    8 x A100-80GB, batch_size 4 per GPU at 80 GB, seq 2048, ZeRO-1 DDPStrategyZero1, mlp_checkpoint_lvl 0) and
    Llama 3 405B's 8K layout (Dubey et al. 2024, Table 4 and sec. 3.3.2: 16,384 H100, TP 8, PP 16, DP 128 sharding
    gradients and optimizer but keeping the gathered weights from forward to backward, i.e. ZeRO-2; micro-batch 1 of
    8,192 tokens, 16M tokens a step, no recomputation stated) both fit."""
    gpt3 = run_cli("estimate", "--params", "2.7B", "--tokens", "10B", "--gpu", "A100-80GB", "--gpus", "8",
                   "--seq-len", "2048", "--micro-batch", "4", "--global-batch", "512", "--sharding", "zero1",
                   "--recompute", "none", "--json").json()
    assert gpt3["fits"] is True, gpt3["memory_gb_per_gpu"]
    llama = run_cli("estimate", "--model", "llama-3.1-405b", "--tokens", "15T", "--gpu", "H100", "--gpus", "16384",
                    "--tp", "8", "--pp", "16", "--seq-len", "8192", "--micro-batch", "1", "--global-batch", "2048",
                    "--sharding", "zero2", "--recompute", "none", "--json").json()
    assert llama["fits"] is True, llama["memory_gb_per_gpu"]
    human = run_cli("estimate", "--model", "llama-3.1-405b", "--tokens", "15T", "--gpu", "H100", "--gpus", "16384",
                    "--tp", "8", "--pp", "16", "--seq-len", "8192", "--micro-batch", "1", "--global-batch", "2048",
                    "--sharding", "zero2", "--recompute", "none").stdout
    assert "fits       yes" in human and "of the memory left" in human  # it fits, close to the limit: said so
