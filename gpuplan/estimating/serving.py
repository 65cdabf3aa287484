"""Serving: how much GPU memory a model needs to generate, and how fast it decodes, by weight format.

Memory per GPU = weights + KV cache + working activations + runtime overhead, the weights and KV cache split over
the tensor-parallel GPUs:
- Weights by format: fp32 4 bytes, fp16/bf16 2, fp8 1 (plus a per-tensor scale), int8 1 (plus one fp16 scale per
  output channel, LLM.int8 / SmoothQuant W8A8), int4 0.5 plus an fp16 scale and a packed 4-bit zero point per
  group of `group_size` weights (GPTQ, Frantar et al. 2022; AWQ, Lin et al. 2023: group 128 -> 0.52 bytes per
  weight). Quantizers leave the embeddings and the output head in 16-bit (AutoGPTQ/AutoAWQ quantize the blocks'
  Linear layers only; vLLM's fp8 checkpoints keep lm_head in bf16), so those stay at 2 bytes.
- KV cache: 2 (K and V) x layers x kv_heads x head_dim x context x batch x 2 bytes (16-bit cache).
- Working activations: one prefill chunk (vLLM's default max_num_batched_tokens 2048 per sequence here) through one
  layer; overhead: CUDA context and allocator fragmentation (memory.CONTEXT_OVERHEAD_GB, memory.FRAGMENTATION).
- MoE: every expert is in memory; a decode step reads the experts the batch's tokens are routed to: with E experts,
  k per token and b tokens per step, E·(1 - (1 - k/E)^b) of them per layer in expectation (uniform routing).
Decode is bound by reading the weights and (on average half of) the KV cache once per step at 80% of the HBM
bandwidth (vLLM / TensorRT-LLM decode kernels reach ~70-85%), or by the FLOPs at 50% of peak, whichever is slower.
GPU counts: tensor parallelism splits the attention heads, so a count must divide them (vLLM refuses otherwise) and
be one an instance offers (1, 2, 4, 8 per node); beyond a node, whole nodes (pipeline parallel across nodes).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.estimating import memory
from gpuplan.estimating.shape import Shape

WEIGHT_FORMATS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")
DEFAULT_GROUP_SIZE = 128
DECODE_BANDWIDTH_EFFICIENCY = 0.8
PREFILL_MFU = 0.5
PREFILL_CHUNK = 2048
GB = 1e9


def weight_bytes_per_param(weight_format: str, group_size: int = DEFAULT_GROUP_SIZE) -> float:
    """Bytes per quantized block weight, group scales and zero points included (see the module docstring)."""
    if weight_format not in WEIGHT_FORMATS:
        raise ValueError(f"weight format must be one of {', '.join(WEIGHT_FORMATS)}")
    if weight_format == "int4":
        if group_size <= 0:
            raise ValueError("group size must be greater than zero")
        return 0.5 + (2.0 + 0.5) / group_size
    return {"fp32": 4.0, "tf32": 4.0, "fp8": 1.0, "int8": 1.0}.get(weight_format, 2.0)


def weights_bytes(shape: Shape, params: int, weight_format: str, group_size: int = DEFAULT_GROUP_SIZE) -> float:
    """All weights in `weight_format`; quantized formats keep embeddings and head in 16-bit."""
    per_param = weight_bytes_per_param(weight_format, group_size)
    if per_param >= 2.0:
        return params * per_param
    blocks = min(params, shape.layers * shape.layer_params)
    return blocks * per_param + (params - blocks) * 2.0


def tp_counts(shape: Shape, *, gpus_per_node: int, max_gpus: int) -> list[int]:
    """GPU counts a model can be served on: powers of two that divide the heads inside a node (an odd head count
    leaves only 1), then whole nodes."""
    counts = [n for n in (1, 2, 4, 8, 16) if n <= gpus_per_node and shape.heads % n == 0]
    nodes = 2
    while nodes * gpus_per_node <= max_gpus:
        counts.append(nodes * gpus_per_node)
        nodes *= 2
    return [n for n in counts if n <= max_gpus]


def check_gpu_count(shape: Shape, gpus: int, gpus_per_node: int) -> None:
    """ValueError when `gpus` cannot serve the model: inside a node the count must divide the attention heads."""
    if gpus <= gpus_per_node and shape.heads % gpus:
        good = [n for n in (1, 2, 4, 8) if n <= gpus_per_node and shape.heads % n == 0]
        raise ValueError(f"{gpus} GPUs cannot split {shape.heads} attention heads evenly (tensor parallel); "
                         f"use {' or '.join(map(str, good[-2:] or [1]))}")


@dataclass(frozen=True)
class ServingMemory:
    """GB per GPU."""

    weights: float
    kv_cache: float
    activations: float
    overhead: float

    @property
    def total(self) -> float:
        return self.weights + self.kv_cache + self.activations + self.overhead


def serving_memory(shape: Shape, *, params: int, weight_format: str, group_size: int, act_precision: str,
                   gpus: int, batch: int, context: int, attention: str = "flash") -> ServingMemory:
    """Per-GPU memory of serving `batch` sequences of `context` tokens on `gpus` GPUs (tensor parallel)."""
    ab = memory.activation_bytes(act_precision)
    weights = weights_bytes(shape, params, weight_format, group_size) / gpus
    kv = memory.kv_cache_bytes(shape, batch=batch, context=context, precision=act_precision) / gpus
    chunk = batch * min(context, PREFILL_CHUNK)
    working = chunk * (2 * shape.hidden + 2 * shape.intermediate) * ab
    if attention == "eager":
        working += chunk * shape.heads * context * 2 * ab
    working /= gpus
    subtotal = weights + kv + working
    overhead = memory.CONTEXT_OVERHEAD_GB * GB + memory.FRAGMENTATION * subtotal
    return ServingMemory(weights / GB, kv / GB, working / GB, overhead / GB)


def experts_read_share(shape: Shape, tokens_per_step: int) -> float:
    """Share of the routed experts' weights one decode step reads (1.0 for a dense model)."""
    if not shape.experts:
        return 1.0
    k, e = shape.experts_per_token, shape.experts
    return 1.0 - (1.0 - k / e) ** max(1, tokens_per_step)


@dataclass(frozen=True)
class DecodeSpeed:
    """Generated tokens per second over all GPUs, and what bounds it."""

    tokens_per_s: float
    bound: str


def decode_speed(shape: Shape, mem: ServingMemory, *, bandwidth_gbps: float | None, peak_tflops: float,
                 gpus: int, batch: int, context: int, forward_flops_per_token: float) -> DecodeSpeed:
    """Tokens/s of `batch` sequences decoding together on `gpus` GPUs (see the module docstring)."""
    weights_read = mem.weights
    if shape.experts:
        expert_share = shape.expert_params / max(1, shape.layers * shape.layer_params)
        weights_read *= 1 - expert_share * (1 - experts_read_share(shape, batch))
    read = (weights_read + mem.kv_cache / 2) * GB
    compute_s = batch * forward_flops_per_token / gpus / (peak_tflops * 1e12 * PREFILL_MFU)
    bandwidth = (bandwidth_gbps or 0.0) * 1e9 * DECODE_BANDWIDTH_EFFICIENCY
    memory_s = read / bandwidth if bandwidth else compute_s
    step = max(compute_s, memory_s)
    return DecodeSpeed(batch / step, "memory bandwidth" if memory_s >= compute_s else "FLOPs")
