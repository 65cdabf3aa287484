"""The estimate's bridge to the step model, and the defaults estimate and plan share.

`estimate` times every training step with gpuplan.estimating.throughput (the one throughput model, whatever the
flags are called); this module builds its ParallelConfig from the Workload (layout filled by
estimate.resolve_layout) and Hardware, splits the memory answer over the model-parallel ranks, and holds the
defaults both `estimate` and `plan` use (global batch by GPU count, precision fallback on GPUs without bf16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpuplan.estimating import layout, memory
from gpuplan.estimating.parallel import ParallelConfig
from gpuplan.estimating.shape import Shape
from gpuplan.estimating.throughput import StepBreakdown, step_breakdown
from gpuplan.estimating.values import Workload
from gpuplan.hardware.gpus import GpuSpec


def typical_global_batch(params: int, seq_len: int) -> int:
    """Sequences per step a run of this size typically uses: ~0.5M tokens below 1B parameters (GPT-2/GPT-3 small),
    2M to 30B, 4M above (GPT-3 175B and Llama 2 use 4M tokens)."""
    target = 0.5e6 if params < 1e9 else 2e6 if params < 30e9 else 4e6
    return max(1, round(target / seq_len))


def default_global_batch(params: int, seq_len: int, *, data_parallel: int = 1, micro_batch: int = 1) -> int:
    """The global batch when the user gives none: the typical one for the size rounded up to a whole number of
    micro-batches on every data-parallel rank (what a step runs: 977 sequences on 8 GPUs would run as 984), so
    more GPUs mean a larger batch (as real runs scale: Llama 2 7B used 4M tokens on 2048 GPUs, not the 2M a 7B
    model trains with on 64)."""
    per_step = max(1, data_parallel * micro_batch)
    return -(-typical_global_batch(params, seq_len) // per_step) * per_step


def precision_for(gpu: GpuSpec, precision: str) -> tuple[str, str | None]:
    """The precision to run on `gpu` and a note when it differs: bf16 on a GPU without bf16 (V100, T4) falls back to
    fp16 with loss scaling, as `gpuplan bench` does (gpuplan/bench/device.py); other gaps stay errors."""
    if gpu.peak_tflops(precision):
        return precision, None
    if precision == "bf16" and gpu.peak_tflops("fp16"):
        return "fp16", f"{gpu.name} has no bf16: fp16 with loss scaling instead (as bench does)"
    return precision, None


@dataclass(frozen=True, slots=True)
class ConfiguredSpeed:
    """The config model's answer for one estimate."""

    step: StepBreakdown
    config: ParallelConfig
    kernels: str = layout.DEFAULT_KERNELS


def configured_speed(workload: Workload, shape: Shape, gpu: GpuSpec, *, gpus: int, gpus_per_node: int,
                     global_batch: int, network_gbps: float | None) -> ConfiguredSpeed:
    """Time one step of `workload` (a gpuplan.estimating.estimate.Workload) on `gpus` x `gpu`."""
    config = ParallelConfig(
        gpus=gpus, gpus_per_node=gpus_per_node, tp=workload.tp or 1, pp=workload.pp or 1,
        sharding=workload.sharding, micro_batch=workload.micro_batch, global_batch=global_batch,
        recompute=workload.recompute or "none", schedule=workload.schedule or "1f1b",
        network_gbps=workload.interconnect_gbps or network_gbps,
        tp_overlap=workload.tp_overlap, dp_overlap=workload.dp_overlap,
    )
    step = step_breakdown(shape, gpu, config, params=workload.params, seq_len=workload.seq_len,
                          precision=workload.precision, attention=workload.attention,
                          kernel_mode=workload.kernels or layout.DEFAULT_KERNELS)
    return ConfiguredSpeed(step, config, workload.kernels or layout.DEFAULT_KERNELS)


def step_summary(speed: ConfiguredSpeed) -> dict[str, Any]:
    """The layout and the step's seconds by part, for `--json`."""
    c, step = speed.config, speed.step
    return {
        "tp": c.tp, "pp": c.pp, "dp": c.dp, "sharding": c.sharding, "micro_batch": c.micro_batch,
        "micro_batches": step.micro_batches, "schedule": c.schedule, "recompute": c.recompute,
        "tp_overlap": c.tp_overlap, "dp_overlap": c.dp_overlap, "kernels": speed.kernels,
        "network_gbps": c.network_gbps,
        "step_s": step.step_s, "seconds": {
            "compute": step.compute_s, "recompute": step.recompute_s, "tensor_parallel": step.tensor_parallel_s,
            "pipeline_bubble": step.pipeline_bubble_s, "pipeline_p2p": step.pipeline_p2p_s,
            "data_parallel_exposed": step.data_parallel_exposed_s,
            "compute_slowed_by_hidden_comm": step.overlap_contention_s, "optimizer": step.optimizer_s,
            "below_ideal": step.sustained_overhead_s},
    }


def model_parallel_share(tp: int, pp: int) -> tuple[float, float]:
    """(share of weights, gradients and optimizer state, share of activations) one GPU holds under tensor x
    pipeline parallelism: the states split tp·pp ways; the activations tp ways (sequence parallel, Korthikanti
    et al. 2022 sec. 4.2.3) — the first 1F1B stage keeps pp micro-batches of its L/pp layers, a full model's worth."""
    return 1.0 / (tp * pp), 1.0 / tp


def data_parallel_ranks(gpus: int, tp: int, pp: int) -> int:
    """Data-parallel replicas of a tp x pp model on `gpus` GPUs (at least one)."""
    return max(1, math.floor(gpus / (tp * pp)))


def split_model_parallel(parts: memory.MemoryParts, tp: int, pp: int) -> memory.MemoryParts:
    """Per-GPU memory when tp x pp GPUs share one replica (model_parallel_share); overhead re-derived."""
    if tp * pp <= 1:
        return parts
    states, acts = model_parallel_share(tp, pp)
    weights, gradients, optimizer = parts.weights * states, parts.gradients * states, parts.optimizer * states
    activations = parts.activations * acts
    subtotal = weights + gradients + optimizer + activations
    overhead = memory.CONTEXT_OVERHEAD_GB + memory.FRAGMENTATION * subtotal
    return memory.MemoryParts(weights, gradients, optimizer, activations, overhead)
