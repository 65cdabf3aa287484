"""How long one GPU takes for the pieces of a transformer layer: matmuls, fused attention, memory-bound ops.

The throughput model (gpuplan.estimating.throughput) adds these up per micro-batch; this module knows only one GPU.
Each constant names where its number comes from:

- Matmuls run at the *achievable* tensor-core rate, not the datasheet peak: the best cuBLAS/hipBLASLt GEMM found by
  a brute-force shape search (Bekman, "Maximum Achievable Matmul FLOPS" table, stas00/ml-engineering
  compute/accelerator/README.md: A100 SXM 271.2 of 312 TFLOP/s = 86.9%, A100 PCIe 81.1%, H100 SXM 792.1 of 989 =
  80.1%, GH200 83.6%, MI300X 60.1%). A GEMM of shape (m, n, k) is a roofline: the larger of its FLOPs at that rate
  and its bytes (2·(mk + kn + mn) in 16-bit) at the memory bandwidth, plus a fixed per-kernel cost (launch and the
  partial last wave of thread blocks: ~5 us, what Nsight shows for small GEMMs on A100/H100). Small models and
  small micro-batches lose to that fixed cost and to the memory side, which is the shape dependence Calculon
  (Isaev et al. 2023) tabulates per GEMM size.
- Fused causal attention (FlashAttention-2, PyTorch SDPA): FlashAttention-2 reaches 50-73% of the A100 peak
  (Dao 2023, abstract and Fig. 5-7, head dim 128, causal), so 0.6; on H100 the same kernel reaches ~35% (Shah et al.
  2024, FlashAttention-3, abstract: "FlashAttention-2 achieves only 35% utilization on H100"). The causal mask
  skips half the score blocks, so the executed FLOPs are half of the 4·s·h per token the MFU convention counts;
  the backward pass does 2.5x the forward's FLOPs (it recomputes the scores: Dao 2023, sec. 3.1.2).
- FlashAttention-1 class kernels (the original CUDA FlashAttention, and the Triton kernel flash_attn_triton.py that
  MPT/llm-foundry ran as `attn_impl: triton` because it takes an ALiBi bias; its docstring: "Overall Triton
  forward + backward is slightly slower than CUDA forward + backward") run at half the FlashAttention-2 rate:
  "FlashAttention-2 ... yields around 2x speedup compared to FlashAttention" (Dao 2023, abstract), whose 25-40% of
  the A100 peak is half of FlashAttention-2's 50-73%.
- Memory-bound ops (norms, residual adds, the MLP activation, rotary embedding, cross-entropy over the vocabulary,
  the optimizer step) move bytes, not FLOPs: their element passes are counted per token below and timed at 70% of
  the HBM bandwidth (STREAM-like copy kernels reach 80-90% of the datasheet bandwidth; PyTorch eager element-wise
  kernels ~70%).
- Those passes depend on how the layer's small ops run (`kernels`). "fused": each norm, the rotary embedding and the
  activation is one kernel (Megatron-Core/NeMo/Transformer Engine, torch.compile, fused RMSNorm/rotary kernels):
  ELEMENTWISE_PASSES_H. "eager": plain PyTorch without torch.compile runs every aten op of a Llama layer as its own
  kernel, with fp32 up-casts (torchtitan's RMSNorm: float, pow, mean, add, rsqrt, mul, type_as, mul weight;
  rotary as a complex multiply in fp32; SwiGLU as silu then mul): EAGER_PASSES, measured, not fitted (below).
"""

from __future__ import annotations

from gpuplan.hardware.gpus import GpuSpec

# Achievable share of the dense peak for a large, well-shaped GEMM (MAMF / datasheet; see the docstring).
MATMUL_EFFICIENCY = {"ampere": 0.869, "hopper": 0.801, "blackwell": 0.776, "cdna3": 0.601, "ada": 0.80,
                     "turing": 0.80, "volta": 0.80, "pascal": 0.80}
PCIE_MATMUL_EFFICIENCY = 0.811  # A100 PCIe in the same table: lower power limit, lower sustained clock
KERNEL_OVERHEAD_S = 5e-6
# A GEMM's inner (k) loop amortises each output tile's prologue and epilogue (load, write-back): efficiency rises
# as k / (k + K0). K0 = 256 = two k-steps of a 128-deep tile (CUTLASS's usual threadblock k-tile is 32-64 deep with
# a 3-4 stage pipeline to fill); normalised so the MAMF table's best shapes (k ~ 5120) reach the MAMF figure.
GEMM_K0 = 256.0
MAMF_K = 5120.0  # fixed cost per GEMM / fused kernel (launch + tail wave)
FLASH_EFFICIENCY = {"ampere": 0.60, "hopper": 0.35, "blackwell": 0.35, "ada": 0.50, "cdna3": 0.35}
FLASH_FALLBACK = 0.40
FLASH1_SPEEDUP = 2.0  # FlashAttention-2 over FlashAttention-1 (Dao 2023, abstract)
FLASH_BACKWARD_RATIO = 2.5
BANDWIDTH_EFFICIENCY = 0.7
EAGER_SCORE_BYTES = 10.0
# Element passes per token and layer in the forward pass, in units of the hidden size h (read + write):
# two norms (2 x 2h), two residual adds (2 x 3h), rotary on q and k (~2h); the MLP activation is counted on the
# intermediate size (GELU: read + write = 2i; SwiGLU: read 2i, write i = 3i). The backward pass moves about twice.
ELEMENTWISE_PASSES_H = 12.0
BACKWARD_ELEMENTWISE_RATIO = 2.0
KERNELS = ("fused", "eager")
# Eager PyTorch, a Llama layer (gated MLP): element passes per token of 2 bytes, in units of (h, kv, i), forward and
# backward. MEASURED, not fitted, by tests/unit/estimating/test_eager_kernels.py, which measures them again: a
# TorchDispatchMode sums the bytes of every aten op of torchtitan's Llama TransformerBlock (torchtitan 9dec370, the
# commit of its H100 benchmark: RMSNorm `_norm(x.float()).type_as(x) * weight`, apply_rotary_emb's complex multiply,
# SwiGLU `w2(silu(w1(x)) * w3(x))`, two residual adds) run forward and backward in bf16 on CPU (the same aten ops and
# autograd formulas as on a GPU), leaving out the matmuls (mm, addmm, bmm: timed as GEMMs) and the attention kernel
# (SDPA forward and backward: timed as fused attention). An op counts the bytes of its tensor inputs and of the
# outputs it writes (a broadcast input at most its storage: re-reads of it hit the cache); an op whose outputs all
# alias an input (view, transpose, view_as_complex, detach, ...) moves nothing and counts nothing. Per token,
# forward: two RMSNorms 2 x 36h bytes (cast 6h, pow 8h, mean 4h, mul 8h, type_as 6h, weight 4h), rotary 20h + 20kv
# (cast 6, complex multiply 8, cast back 6), residual adds 12h, SwiGLU 10i = 104h + 20kv + 10i bytes, i.e.
# (52, 10, 5) passes; backward (117, 10, 9). The fused count of the same layer is (12, 0, 3), twice that backward.
# A GPT layer (LayerNorm, GELU, no rotary) runs each norm and its activation as one aten kernel even in eager mode:
# measured (10, 0, 2) forward and (18, 0, 3) backward, within the fused count, so eager changes nothing there.
# torchtitan's repeat_kv copy of K and V to every head (before SDPA) is left out, as in the fused count: a compiled
# run writes the repeated K and V too.
EAGER_PASSES = ((52.0, 10.0, 5.0), (117.0, 10.0, 9.0))
# Cross-entropy over the vocabulary per token: bf16 logits written and read, fp32 up-cast, softmax and its
# gradient (~16 bytes per logit over forward and backward).
LOGIT_BYTES = 16.0
# fp8 training (Transformer Engine, torchao Float8Linear) casts every GEMM input in the forward pass and every
# output gradient in the backward pass to fp8 with a transposed copy for the other GEMM (TE's fused
# cast_transpose: read 2 bytes, write 1 + 1), and each step casts the weights once the same way: bytes per element.
FP8_CAST_BYTES = 4.0
# AdamW step per local parameter in mixed precision: read fp32 master, m, v and the gradient, write master, m, v
# and the 16-bit copy (4+4+4+2 + 4+4+4+2 bytes; PyTorch's fused/foreach AdamW is bandwidth bound).
OPTIMIZER_BYTES_PER_PARAM = 28.0


def matmul_efficiency(gpu: GpuSpec) -> float:
    """Share of the dense peak the best-shaped GEMM reaches on `gpu`."""
    if gpu.generation == "ampere" and "PCIe" in gpu.form_factor:
        return PCIE_MATMUL_EFFICIENCY
    return MATMUL_EFFICIENCY.get(gpu.generation, 0.75)


def bandwidth_bytes_per_s(gpu: GpuSpec) -> float:
    """Achievable HBM bytes/s for memory-bound kernels (0 when the table has no bandwidth)."""
    return (gpu.memory_bandwidth_gbps or 0.0) * 1e9 * BANDWIDTH_EFFICIENCY


def gemm_seconds(m: float, n: float, k: float, *, gpu: GpuSpec, peak_flops: float, element_bytes: float = 2.0) -> float:
    """One (m x k) @ (k x n) GEMM: roofline of FLOPs at the achievable rate and bytes at the bandwidth, plus the
    fixed per-kernel cost."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    depth = (k / (k + GEMM_K0)) / (MAMF_K / (MAMF_K + GEMM_K0))
    compute = 2.0 * m * n * k / (peak_flops * matmul_efficiency(gpu) * min(1.0, depth))
    bandwidth = bandwidth_bytes_per_s(gpu)
    memory = element_bytes * (m * k + k * n + m * n) / bandwidth if bandwidth else 0.0
    return max(compute, memory) + KERNEL_OVERHEAD_S


def flash_attention_seconds(tokens: float, seq_len: int, heads_dim: float, *, gpu: GpuSpec, peak_flops: float,
                            backward: bool, generation: int = 2) -> float:
    """Causal fused attention for `tokens` tokens in sequences of `seq_len`, `heads_dim` = heads x head size on
    this GPU: forward 4·s·d per token halved by the mask; backward 2.5x that. `generation` 1 = a
    FlashAttention-1 class kernel (half the FlashAttention-2 rate)."""
    flops = 0.5 * 4.0 * tokens * seq_len * heads_dim
    if backward:
        flops *= FLASH_BACKWARD_RATIO
    efficiency = FLASH_EFFICIENCY.get(gpu.generation, FLASH_FALLBACK)
    if generation == 1:
        efficiency /= FLASH1_SPEEDUP
    return flops / (peak_flops * efficiency) + KERNEL_OVERHEAD_S


def eager_attention_seconds(tokens: float, seq_len: int, heads_dim: float, heads: float, *, gpu: GpuSpec,
                            peak_flops: float, act_bytes: float, backward: bool) -> float:
    """Unfused attention (Megatron-LM 2021/2022's batched GEMMs with a fused softmax, torch < 2.0, custom code):
    QK^T and attention x V as batched GEMMs over the full s x s (no causal saving), plus the a·s scores per token
    written, soft-maxed and read back (EAGER_SCORE_BYTES per score element forward: Korthikanti et al. 2022 count
    5 bytes of stored activations per score; the passes through HBM are about twice that)."""
    flops = 4.0 * tokens * seq_len * heads_dim * (2.0 if backward else 1.0)
    matmul = flops / (peak_flops * matmul_efficiency(gpu))
    scores = tokens * heads * seq_len * EAGER_SCORE_BYTES * act_bytes / 2.0 * (2.0 if backward else 1.0)
    return matmul + memory_seconds(scores, gpu) + 2 * KERNEL_OVERHEAD_S


def memory_seconds(nbytes: float, gpu: GpuSpec) -> float:
    """Seconds to stream `nbytes` through HBM at the achievable bandwidth."""
    bandwidth = bandwidth_bytes_per_s(gpu)
    return nbytes / bandwidth if bandwidth and nbytes > 0 else 0.0


def fp8_cast_bytes(tokens: float, hidden: float, kv_dim: float, intermediate: float, *,
                   gated: bool) -> tuple[float, float]:
    """(forward, backward) bytes of one layer's fp8 casts for `tokens` tokens (this GPU's share): the inputs of the
    QKV, output, MLP-up and MLP-down GEMMs (h, h, h, i), then the gradients of their outputs (h + 2·kv, h, the
    MLP-up width, h). TE's LayerNormLinear/LayerNormMLP fuse two of the forward casts into the norm and the
    activation; counted anyway, as torchao and te.Linear run them."""
    up = (2.0 if gated else 1.0) * intermediate
    forward = tokens * (3.0 * hidden + intermediate) * FP8_CAST_BYTES
    backward = tokens * (3.0 * hidden + 2.0 * kv_dim + up) * FP8_CAST_BYTES
    return forward, backward


def elementwise_bytes(tokens: float, hidden: float, intermediate: float, *, gated: bool, act_bytes: float,
                      kv_dim: float = 0.0, kernels: str = "fused") -> tuple[float, float]:
    """(forward, backward) bytes of one layer's memory-bound ops for `tokens` tokens (this GPU's share of h, kv
    and i). `kernels` "eager" counts a gated (Llama) layer's measured eager passes (EAGER_PASSES); a GPT layer's
    eager kernels are the fused count already."""
    if kernels == "eager" and gated:
        forward, backward = ((h * hidden + kv * kv_dim + i * intermediate) * tokens * act_bytes
                             for h, kv, i in EAGER_PASSES)
        return forward, backward
    forward = tokens * (ELEMENTWISE_PASSES_H * hidden + (3.0 if gated else 2.0) * intermediate) * act_bytes
    return forward, BACKWARD_ELEMENTWISE_RATIO * forward
