"""Memory per GPU: weights, gradients, optimizer state, activations and overhead, in GB (1e9 bytes).

Sources for the byte counts:
- Mixed-precision Adam keeps 16 bytes per parameter: 2 (fp16/bf16 weights) + 2 (gradients) + 12 (fp32 master
  weights, momentum, variance) — Rajbhandari et al. 2020, "ZeRO", section 3.1. ZeRO stage 1 shards the 12
  optimizer bytes over the data-parallel ranks, stage 2 also the gradients, stage 3 (= PyTorch FSDP full
  shard) also the weights (ZeRO, section 5 and Figure 1: 7.5B on 64 GPUs = 120 GB -> 31.4/16.6/1.9 GB).
- Pure fp32 (or tf32, which stores fp32): 4 + 4 + 8 bytes (Adam's two fp32 moments), no master copy.
- 8-bit Adam: two 1-byte moments (Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization");
  Adafactor: factored second moment, ~0 bytes/parameter at LLM shapes (Shazeer & Stern 2018) — we count
  nothing for it; SGD with momentum: one state.
- Activations per layer, per sequence of s tokens, hidden h, a query heads, 16-bit: Korthikanti et al. 2022,
  "Reducing Activation Recomputation", sec. 4.1 and Table 2: s·h·(34 + 5·a·s/h) bytes = attention 11·s·h +
  5·a·s² (softmax output 2as², its dropout mask as², dropout output 2as²), MLP 19·s·h (4h GELU MLP; 2sh + 8·s·i
  for a SwiGLU MLP), two norms 4·s·h. That is `attention="eager"`: the scores are materialised.
  `attention="flash"` (the default): FlashAttention (Dao et al. 2022, sec. 3.1 and Algorithm 2; FlashAttention-2,
  Dao 2023) and PyTorch 2's scaled_dot_product_attention keep, for the backward pass, Q, K, V, the output O and
  the per-row softmax statistic L = m + log(l) (the logsumexp) — fp32, one per query head and query token — and
  regenerate the dropout mask from the RNG seed. So the 5·a·s² term goes and 4·a·s bytes come in: the layer keeps
  11·s·h + 4·a·s + MLP + norms, i.e. 34·s·h + 4·a·s (for Llama-2-7B, a=32, h=4096: +0.4%).
  Grouped-query/multi-query attention (kv_heads < heads): the fused kernels index the shared K/V head per query
  head (FlashAttention-2 handles MQA/GQA natively; PyTorch SDPA's enable_gqa), so K and V cost 2·s·kv_dim each
  instead of 2·s·h. Eager attention implementations (Hugging Face's `repeat_kv`, Megatron's repeat_interleave)
  expand K and V to every query head before the two matmuls, which save the expanded copies: 2·s·h each again.
  fp32/tf32: there is no fp32 FlashAttention kernel (flash-attention issue #622: "fp32 is not supported";
  PyTorch's flash backend takes fp16/bf16 only), but SDPA then dispatches to its memory-efficient kernel (Rabe &
  Staats 2021; xformers' CUTLASS kernel), which accepts fp32 on every CUDA GPU (sdp_utils.cpp,
  can_use_mem_efficient_attention: fp16/fp32 below sm80, plus bf16 from sm80) and likewise saves only O and the
  fp32 logsumexp. So "flash" means "fused attention, scores never stored" in every precision, with 4-byte
  activations in fp32. Full activation checkpointing keeps only each layer's 2·s·h input plus one layer's full
  set while it is recomputed (including, with eager attention, that layer's scores). The logits add s·V·(2 + 4)
  bytes (bf16 logits, fp32 softmax).
- Overhead: CUDA context and NCCL buffers (~1 GB, what `nvidia-smi` shows for an idle PyTorch process)
  plus 5% allocator fragmentation; ZeRO-3/FSDP also holds one gathered layer (and the prefetched next).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gpuplan.estimating.shape import Shape

GB = 1e9
CONTEXT_OVERHEAD_GB = 1.0
FRAGMENTATION = 0.05

# Bytes per *trainable* parameter for optimizer state, on top of weights and gradients.
_OPTIMIZER_STATE_BYTES = {"adamw": 8.0, "adam": 8.0, "adam8bit": 2.0, "sgd": 4.0, "adafactor": 0.0}
OPTIMIZERS = tuple(_OPTIMIZER_STATE_BYTES)
SHARDINGS = ("none", "zero1", "zero2", "zero3", "fsdp")
# flash: a fused kernel (FlashAttention, PyTorch SDPA flash / memory-efficient) that never stores the s x s scores;
# eager: softmax(QK^T) computed and kept by ordinary ops.
ATTENTIONS = ("flash", "flash1", "eager")
FUSED_ATTENTIONS = ("flash", "flash1")  # scores never stored; flash1 = FlashAttention-1 class kernels (speed only)
LOGSUMEXP_BYTES = 4.0  # FlashAttention's softmax statistic is fp32 whatever the activation precision


def weight_bytes(precision: str) -> float:
    """Bytes of one stored weight: 2 in 16-bit mixed precision (fp8 training keeps bf16 weights), 4 in fp32/tf32."""
    return 4.0 if precision in ("fp32", "tf32") else 2.0


def activation_bytes(precision: str) -> float:
    return 4.0 if precision in ("fp32", "tf32") else 2.0


@dataclass(frozen=True, slots=True)
class MemoryParts:
    weights: float
    gradients: float
    optimizer: float
    activations: float
    overhead: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.overhead


def attention_activation_bytes(shape: Shape, tokens: int, precision: str, *, seq_len: int | None = None,
                               attention: str = "flash", dropout: bool = False) -> float:
    """What the attention block keeps for backward, for `tokens` tokens in sequences of `seq_len` (default: one).

    Only eager attention needs `seq_len`: its scores grow with s² per sequence, tokens/s sequences x a·s² =
    a·s·tokens elements. tests/unit/estimating/test_attention_memory.py measures these bytes on a real torch block.
    """
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}")
    b = activation_bytes(precision)
    h, a = shape.hidden, shape.heads
    s = seq_len or tokens
    if attention in FUSED_ATTENTIONS:
        # Layer input, Q and O (h each), K and V at their own width (GQA), and the fp32 logsumexp per query head.
        per_token = b * (3 * h + 2 * shape.kv_dim) + LOGSUMEXP_BYTES * a
    else:
        # Layer input, Q, O and K, V expanded to every query head (h each); the softmax output (a·s per token),
        # and with dropout its 1-byte mask and the dropped-out copy (Korthikanti's 2as² + as² + 2as²).
        per_token = b * 5 * h + a * s * (b + ((1 + b) if dropout else 0))
    return tokens * per_token


def layer_activation_bytes(shape: Shape, tokens: int, precision: str, *, seq_len: int | None = None,
                           attention: str = "flash", dropout: bool = False, fused_swiglu: bool = False) -> float:
    """Activations one transformer layer keeps for the backward pass, for `tokens` tokens (micro-batch x seq).

    The MLP keeps its input and, for GELU, the pre-activation and the activation output (Korthikanti's 2 + 8 + 8
    s·h for a 4h MLP). A SwiGLU MLP in ordinary PyTorch (`F.silu(gate) * up`: Hugging Face, torchtitan) keeps gate
    and up (the fc1 output, 2·i), silu(gate) and the product (i each): 4·i. `fused_swiglu`: Megatron-Core's
    SwiGLUFunction (megatron/core/fusions/fused_bias_swiglu.py, on by default with --swiglu) saves only its input
    (gate and up) and recomputes silu in the backward pass: 3·i. tests/unit/estimating/test_layer_memory.py
    measures both on a real torch layer."""
    b = activation_bytes(precision)
    h, i = shape.hidden, shape.intermediate
    attn = attention_activation_bytes(shape, tokens, precision, seq_len=seq_len, attention=attention,
                                      dropout=dropout)
    mlp = b * (h + ((3 if fused_swiglu else 4) * i if shape.gated_mlp else 2 * i))
    norms = 2 * b * h
    masks = (2 * h) if dropout else 0  # 1-byte dropout masks after attention and MLP
    return attn + tokens * (mlp + norms + masks)


@functools.lru_cache(maxsize=4096)
def training_memory(
    shape: Shape,
    *,
    params: int,
    trainable_params: int,
    precision: str,
    optimizer: str,
    sharding: str,
    dp: int,
    micro_batch: int,
    seq_len: int,
    checkpointing: bool,
    attention: str = "flash",
    fused_swiglu: bool = False,
) -> MemoryParts:
    """Per-GPU memory of data-parallel training over `dp` ranks with the given ZeRO/FSDP `sharding`
    (`fused_swiglu`: layer_activation_bytes).

    Memoised, a pure function of frozen values: `plan`'s searches for the fewest GPUs and the least recomputation
    ask for the same breakdown again for every GPU memory size, node count and network (some 2,500 times for a few
    hundred different answers in a deadline plan)."""
    wb = weight_bytes(precision)
    mixed = wb == 2.0
    frozen = params - trainable_params
    weights = params * wb
    gradients = trainable_params * wb
    # Mixed precision also keeps an fp32 master copy of each trained weight (ZeRO's "K=12" = 4 + 4 + 4).
    optimizer_state = trainable_params * (_OPTIMIZER_STATE_BYTES[optimizer] + (4.0 if mixed else 0.0))
    if optimizer == "sgd" and mixed:
        optimizer_state = trainable_params * (4.0 + 4.0)
    stage = {"none": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}[sharding]
    if stage >= 1:
        optimizer_state /= dp
    if stage >= 2:
        gradients /= dp
    gathered = 0.0
    if stage >= 3:
        # Frozen weights (LoRA) are sharded too under FSDP; one layer is gathered at a time, plus the prefetch.
        weights = (frozen + trainable_params) * wb / dp
        gathered = 2 * shape.layer_params * wb if dp > 1 else 0.0
    tokens = micro_batch * seq_len
    per_layer = layer_activation_bytes(shape, tokens, precision, seq_len=seq_len, attention=attention,
                                       fused_swiglu=fused_swiglu)
    if checkpointing:
        activations = shape.layers * tokens * shape.hidden * activation_bytes(precision) + per_layer
    else:
        activations = shape.layers * per_layer
    activations += tokens * shape.vocab * (activation_bytes(precision) + 4.0)
    subtotal = weights + gradients + optimizer_state + activations
    overhead = CONTEXT_OVERHEAD_GB * GB + FRAGMENTATION * subtotal + gathered
    return MemoryParts(weights / GB, gradients / GB, optimizer_state / GB, activations / GB, overhead / GB)


def kv_cache_bytes(shape: Shape, *, batch: int, context: int, precision: str) -> float:
    """K and V for every layer, sequence and position: 2 · L · kv_dim · context · batch · bytes."""
    return 2.0 * shape.layers * shape.kv_dim * context * batch * activation_bytes(precision)


