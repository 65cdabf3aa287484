"""How long, and how much memory: the training (or inference) estimate as pure functions on dataclasses.

`estimate(workload, hardware, throughput)` answers FLOPs, memory per GPU, whether it fits, the smallest GPU
count that fits, tokens/s per GPU, scaling efficiency, wall hours and GPU-hours. No I/O: the CLI resolves the
throughput (user > bench > calibrated > default) and the prices, the planner calls this in a loop.
The formulas live in gpuplan.estimating (flops, memory, mfu, comms), each citing its sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from gpuplan.estimating import comms, configured, counts, flops, memory, serving
from gpuplan.estimating.architecture import Architecture
from gpuplan.estimating.configured import default_global_batch
from gpuplan.estimating.memory import ATTENTIONS, OPTIMIZERS, SHARDINGS
from gpuplan.estimating.mfu import PRIOR_RATIO_BAND, default_mfu, mfu_prior
from gpuplan.estimating.parallel import RECOMPUTES, SCHEDULES
from gpuplan.estimating.shape import Shape, shape_of
from gpuplan.hardware.gpus import PRECISIONS, GpuSpec

__all__ = [
    "ATTENTIONS",
    "MODES",
    "OPTIMIZERS",
    "PRECISIONS",
    "SHARDINGS",
    "THROUGHPUT_SOURCES",
    "Estimate",
    "Hardware",
    "MemoryBreakdown",
    "Throughput",
    "Workload",
    "default_global_batch",
    "default_mfu",
    "estimate",
    "lora_params",
    "min_gpus",
]

MODES = ("train", "inference")
THROUGHPUT_SOURCES = ("user", "measured", "bench", "calibrated", "config", "default")
# Share of a GPU's memory a training framework can plan for (allocator fragmentation, NCCL and CUDA workspaces
# take the rest; PyTorch's caching allocator typically loses 5-10%): an assumption for the parallel layout only.
USABLE_MEMORY = 0.9


@dataclass(frozen=True)
class Workload:
    """What to train (or serve). `params` is the total parameter count; `architecture` refines the formulas."""

    params: int
    tokens: int
    architecture: Architecture | None = None
    seq_len: int = 2048
    global_batch: int | None = None  # sequences per optimizer step; None = a typical batch for the size
    micro_batch: int = 1
    precision: str = "bf16"
    optimizer: str = "adamw"
    sharding: str = "none"
    activation_checkpointing: bool = False
    lora_rank: int | None = None
    mode: str = "train"
    batch: int = 1  # inference: concurrent sequences
    context: int = 2048  # inference: tokens of context per sequence (prompt + generated)
    # flash: fused attention that never stores the s x s scores (PyTorch 2 SDPA, FlashAttention-2); flash1: the
    # same memory at FlashAttention-1's speed (half); eager: softmax(QK^T) materialised (torch < 2.0, custom
    # attention). The activation memory and the config model's attention time depend on it.
    attention: str = "flash"
    # How the job runs, when the user says (the config-aware model, gpuplan.estimating.throughput, then answers):
    # tensor and pipeline parallel sizes, the recomputation (None: from activation_checkpointing), the pipeline
    # schedule, the inter-node network in Gbit/s per node and whether TP exchanges overlap the GEMMs.
    tp: int = 1
    pp: int = 1
    recompute: str | None = None
    schedule: str = "1f1b"
    interconnect_gbps: float | None = None
    tp_overlap: bool = False
    dp_overlap: bool = False
    # Serving: the stored weights' format (None = the precision) and the int4 quantization group size.
    weight_format: str | None = None
    group_size: int = serving.DEFAULT_GROUP_SIZE

    def __post_init__(self) -> None:
        problems = []
        if self.tp < 1 or self.pp < 1:
            problems.append("tp and pp must be at least 1")
        if self.weight_format is not None and self.weight_format not in serving.WEIGHT_FORMATS:
            problems.append(f"weight format must be one of {', '.join(serving.WEIGHT_FORMATS)}")
        if self.group_size <= 0:
            problems.append("group size must be greater than zero")
        if self.recompute is not None and self.recompute not in RECOMPUTES:
            problems.append(f"recompute must be one of {', '.join(RECOMPUTES)}")
        if self.schedule not in SCHEDULES:
            problems.append(f"schedule must be one of {', '.join(SCHEDULES)}")
        for name in ("params", "tokens", "seq_len", "micro_batch", "batch", "context"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be greater than zero")
        if self.global_batch is not None and self.global_batch <= 0:
            problems.append("global_batch must be greater than zero")
        if self.lora_rank is not None and self.lora_rank <= 0:
            problems.append("lora_rank must be greater than zero")
        if self.precision not in PRECISIONS:
            problems.append(f"precision must be one of {', '.join(PRECISIONS)}")
        if self.optimizer not in OPTIMIZERS:
            problems.append(f"optimizer must be one of {', '.join(OPTIMIZERS)}")
        if self.sharding not in SHARDINGS:
            problems.append(f"sharding must be one of {', '.join(SHARDINGS)}")
        if self.mode not in MODES:
            problems.append(f"mode must be one of {', '.join(MODES)}")
        if self.attention not in ATTENTIONS:
            problems.append(f"attention must be one of {', '.join(ATTENTIONS)}")
        if problems:
            raise ValueError("; ".join(problems))


@dataclass(frozen=True)
class Hardware:
    """Where it runs: `gpus` in total, `nodes` x `gpus_per_node` (gpus = nodes x gpus_per_node)."""

    gpu: GpuSpec
    gpus: int = 1
    nodes: int | None = None
    gpus_per_node: int | None = None
    network_gbps: float | None = None  # inter-node Gbit/s per node; None = the GPU's usual cloud instance

    def __post_init__(self) -> None:
        if self.gpus <= 0:
            raise ValueError("gpus must be greater than zero")
        per_node = self.gpus_per_node
        nodes = self.nodes
        if per_node is not None and per_node <= 0:
            raise ValueError("gpus_per_node must be greater than zero")
        if nodes is not None and nodes <= 0:
            raise ValueError("nodes must be greater than zero")
        if nodes is not None and per_node is not None and nodes * per_node != self.gpus:
            raise ValueError(f"{self.gpus} GPUs do not split into {nodes} nodes x {per_node} GPUs")
        if nodes is None and per_node is None:
            # The largest node of up to 8 GPUs that the count splits into (12 -> 2 x 6): clouds sell 1-8 per node.
            per_node = max(d for d in range(1, 9) if self.gpus % d == 0)
        if per_node is None:
            assert nodes is not None
            if self.gpus % nodes:
                raise ValueError(f"{self.gpus} GPUs do not split evenly into {nodes} nodes")
            per_node = self.gpus // nodes
        if nodes is None:
            if self.gpus % per_node:
                raise ValueError(f"{self.gpus} GPUs do not split into nodes of {per_node} GPUs")
            nodes = self.gpus // per_node
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "gpus_per_node", per_node)
        if self.network_gbps is not None and self.network_gbps <= 0:
            raise ValueError("network_gbps must be greater than zero")

    @property
    def node_count(self) -> int:
        assert self.nodes is not None
        return self.nodes

    @property
    def per_node(self) -> int:
        assert self.gpus_per_node is not None
        return self.gpus_per_node


@dataclass(frozen=True)
class Throughput:
    """A throughput to use instead of the default prior: tokens/s per GPU, or an MFU, and where it came from.

    Both describe one GPU's compute rate on one node; the communication model's scaling efficiency is applied on
    top for multi-GPU runs.
    """

    tokens_per_s_per_gpu: float | None = None
    mfu: float | None = None
    source: str = "user"
    detail: str = ""
    # Which stored record it came from, for the JSON: {"bench_id", "transferred", ...} or {"calibration_id", ...}.
    ref: dict[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if (self.tokens_per_s_per_gpu is None) == (self.mfu is None):
            raise ValueError("give exactly one of tokens_per_s_per_gpu or mfu")
        if self.tokens_per_s_per_gpu is not None and self.tokens_per_s_per_gpu <= 0:
            raise ValueError("throughput must be greater than zero")
        if self.mfu is not None and not 0 < self.mfu <= 1:
            raise ValueError("mfu must be in (0, 1]")
        if self.source not in THROUGHPUT_SOURCES:
            raise ValueError(f"throughput source must be one of {', '.join(THROUGHPUT_SOURCES)}")


@dataclass(frozen=True)
class MemoryBreakdown:
    """GB (1e9 bytes) per GPU."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    overhead: float
    total: float
    kv_cache: float = 0.0  # serving: K and V of every cached token (counted in total)


@dataclass(frozen=True)
class Estimate:
    """The answer. The first keys are the documented JSON contract; the rest explain it."""

    params: int
    tokens: int
    flops: float
    gpu: str
    gpus: int
    nodes: int
    memory_gb_per_gpu: MemoryBreakdown
    fits: bool
    min_gpus: int | None
    mfu: float
    mfu_source: str
    tokens_per_s_per_gpu: float
    scaling_efficiency: float
    wall_hours: float
    gpu_hours: float
    cost: list[dict[str, Any]] = field(default_factory=list)
    # With the default prior: the range 80% of published runs fell in (mfu.PRIOR_RATIO_BAND); None otherwise.
    wall_hours_range: tuple[float, float] | None = None
    gpu_hours_range: tuple[float, float] | None = None
    # Explanation.
    mode: str = "train"
    gpus_per_node: int = 1
    gpu_memory_gb: float = 0.0
    precision: str = "bf16"
    peak_tflops: float = 0.0
    trainable_params: int = 0
    model_flops: float = 0.0
    hardware_flops: float = 0.0
    flops_per_token: float = 0.0
    effective_mfu: float = 0.0
    seq_len: int = 0
    global_batch: int = 0
    micro_batch: int = 1
    sharding: str = "none"
    attention: str = "flash"
    mfu_detail: str = ""
    fit_hint: str | None = None
    assumptions: list[str] = field(default_factory=list)
    mfu_ref: dict[str, Any] | None = None  # the bench record or calibration behind mfu_source, if any
    # mfu_source "config": the layout and the step's seconds by part (configured.step_summary).
    parallel: dict[str, Any] | None = None


def lora_params(shape: Shape, rank: int) -> int:
    """Adapter parameters of LoRA on the attention projections q, k, v, o (Hu et al. 2021's setting)."""
    h, kv = shape.hidden, shape.kv_dim
    per_layer = rank * ((h + h) + 2 * (h + kv) + (h + h))
    return shape.layers * per_layer


def _peak(gpu: GpuSpec, precision: str) -> float:
    peak = gpu.peak_tflops(precision)
    if not peak:
        supported = [p for p in PRECISIONS if gpu.peak_tflops(p)]
        raise ValueError(f"{gpu.name} has no {precision} throughput; it supports {', '.join(supported)}")
    return peak


def _training_memory(workload: Workload, shape: Shape, dp: int, sharding: str | None = None,
                     checkpointing: bool | None = None) -> memory.MemoryParts:
    trainable = lora_params(shape, workload.lora_rank) if workload.lora_rank else workload.params
    return memory.training_memory(
        shape, params=workload.params, trainable_params=trainable, precision=workload.precision,
        optimizer=workload.optimizer, sharding=sharding or workload.sharding, dp=dp,
        micro_batch=workload.micro_batch, seq_len=workload.seq_len,
        checkpointing=workload.activation_checkpointing if checkpointing is None else checkpointing,
        attention=workload.attention,
    )


def _memory(workload: Workload, shape: Shape, gpus: int, **overrides: Any) -> memory.MemoryParts:
    if workload.mode == "inference":
        mem = serving_memory_of(workload, shape, gpus)
        return memory.MemoryParts(mem.weights, 0.0, 0.0, mem.kv_cache + mem.activations, mem.overhead)
    return _training_memory(workload, shape, gpus, **overrides)


def serving_memory_of(workload: Workload, shape: Shape, gpus: int) -> serving.ServingMemory:
    """Per-GPU serving memory of `workload` on `gpus` GPUs (the one definition estimate and the VRAM answer use)."""
    return serving.serving_memory(
        shape, params=workload.params, weight_format=workload.weight_format or workload.precision,
        group_size=workload.group_size, act_precision=workload.precision, gpus=gpus, batch=workload.batch,
        context=workload.context, attention=workload.attention)


def min_gpus(workload: Workload, gpu: GpuSpec, *, gpus_per_node: int = 8, max_gpus: int = 65536,
             sharding: str | None = None) -> int | None:
    """The fewest GPUs of type `gpu` the workload fits on (with its sharding, or `sharding`); None if none do.

    Without sharding more GPUs do not reduce per-GPU memory in training, so the answer is 1 or None; inference
    splits weights and KV cache over the GPUs (tensor parallel).
    """
    shape = shape_of(workload.params, workload.architecture)
    overrides = {"sharding": sharding} if sharding else {}

    group = workload.tp * workload.pp if workload.mode == "train" else 1
    if group > 1:  # whole tp x pp replicas: search the data-parallel count
        def fits_dp(dp: int) -> bool:
            parts = _training_memory(workload, shape, dp, **overrides)
            return configured.split_model_parallel(parts, workload.tp, workload.pp).total <= gpu.memory_gb

        top = max(1, max_gpus // group)
        if not fits_dp(top):
            return None
        lo_dp, hi_dp = 1, top
        while lo_dp < hi_dp:
            mid = (lo_dp + hi_dp) // 2
            lo_dp, hi_dp = (lo_dp, mid) if fits_dp(mid) else (mid + 1, hi_dp)
        return lo_dp * group

    def fits(n: int) -> bool:
        return _memory(workload, shape, n, **overrides).total <= gpu.memory_gb

    if workload.mode == "inference":  # counts an instance offers that divide the heads (no "5 x L4")
        return next((n for n in serving.tp_counts(shape, gpus_per_node=gpus_per_node, max_gpus=max_gpus)
                     if fits(n)), None)

    size = counts.count_of_counts(gpus_per_node, max_gpus)
    if size == 0 or not fits(counts.valid_count(size - 1, gpus_per_node)):
        return None
    lo, hi = 0, size - 1  # memory falls monotonically with the count: binary search the first fit
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(counts.valid_count(mid, gpus_per_node)):
            hi = mid
        else:
            lo = mid + 1
    return counts.valid_count(lo, gpus_per_node)


def _fit_hint(workload: Workload, hardware: Hardware) -> str:
    """What would fit: more GPUs with these settings, ZeRO-3 across M, and checkpointing if that is needed too."""
    gpu, per_node = hardware.gpu, hardware.per_node
    options = []
    needed = min_gpus(workload, gpu, gpus_per_node=per_node)
    if needed is not None and needed > hardware.gpus:
        options.append(f"needs at least {needed} x {gpu.name}")
    if workload.mode == "train":
        shape = shape_of(workload.params, workload.architecture)
        if not workload.activation_checkpointing and \
                _memory(workload, shape, hardware.gpus, checkpointing=True).total <= gpu.memory_gb:
            options.append(f"--activation-checkpointing on {hardware.gpus} x {gpu.name}")
        if workload.sharding not in ("zero3", "fsdp"):
            z3 = min_gpus(workload, gpu, gpus_per_node=per_node, sharding="zero3")
            if z3 is not None:
                options.append(f"zero3 across {z3} x {gpu.name}")
        if not options and not workload.activation_checkpointing:
            both = min_gpus(replace(workload, sharding="zero3", activation_checkpointing=True), gpu,
                            gpus_per_node=per_node)
            if both is not None:
                options.append(f"zero3 with --activation-checkpointing across {both} x {gpu.name}")
    if not options:
        return f"does not fit on any number of {gpu.name} with these settings; try a GPU with more memory"
    return "does not fit: " + ", or ".join(options)


def model_parallel_degree(workload: Workload, shape: Shape, gpu: GpuSpec, gpus: int, global_batch: int) -> int:
    """How many GPUs share one model replica (tensor/pipeline/context parallel) in a run of this size.

    Two things force it above 1, and real runs follow both: fewer sequences per step than GPUs (each sequence
    must be split: Llama 3 405B's 16M-token batch on 16K GPUs), and a replica whose weights, gradients and
    activations do not fit in one GPU's memory (BLOOM-176B: TP 4 x PP 12 on 80 GB, Le Scao et al. 2022 sec.
    3.4; Falcon-40B: TP 8 x PP 4 on 40 GB, its model card; GPT-NeoX-20B: TP 2 x PP 4 on 40 GB). The memory
    test splits weights, gradients and activations m ways (Megatron tensor + sequence parallel shards all
    three, Korthikanti et al. 2022) while ZeRO-1/2 still shard the optimizer over the data-parallel ranks.
    ZeRO-3/FSDP shard the replica over data-parallel ranks instead, so only the batch condition applies there.
    The answer is a power of two, at most `gpus`, and explains the data-parallel volume (comms.py) and the
    model-parallel penalty (mfu.py); it does not change the memory answer, which is for the stated sharding.
    """
    split = max(1, math.ceil(gpus / global_batch))
    if workload.sharding in ("zero3", "fsdp") or gpus <= 1:
        return min(split, gpus)
    m = 1
    while m < gpus:
        parts = _training_memory(workload, shape, max(1, gpus // m))
        states = parts.weights + parts.gradients + parts.activations + parts.optimizer
        if states / m + memory.CONTEXT_OVERHEAD_GB <= gpu.memory_gb * USABLE_MEMORY:
            break
        m *= 2
    return min(gpus, max(split, m))


def estimate(workload: Workload, hardware: Hardware, throughput: Throughput | None = None) -> Estimate:
    """The estimate for `workload` on `hardware`; `throughput` overrides the default MFU prior.

    Raises ValueError for a precision the GPU cannot run (e.g. bf16 on a V100).
    """
    precision, fallback = configured.precision_for(hardware.gpu, workload.precision)
    if fallback:
        result = estimate(replace(workload, precision=precision), hardware, throughput)
        return replace(result, assumptions=[fallback, *result.assumptions])
    if workload.mode == "inference":
        return _inference_estimate(workload, hardware, throughput)
    gpu, gpus = hardware.gpu, hardware.gpus
    shape = shape_of(workload.params, workload.architecture)
    peak = _peak(gpu, workload.precision)
    trainable = lora_params(shape, workload.lora_rank) if workload.lora_rank else workload.params
    fpt = flops.training_flops_per_token(shape, workload.seq_len, recompute=workload.activation_checkpointing,
                                         lora=bool(workload.lora_rank), trainable_params=trainable)
    dp = configured.data_parallel_ranks(gpus, workload.tp, workload.pp)
    mem = configured.split_model_parallel(_training_memory(workload, shape, dp), workload.tp, workload.pp)
    total = mem.total
    fits = total <= gpu.memory_gb
    needed = min_gpus(workload, gpu, gpus_per_node=hardware.per_node)
    assumptions: list[str] = []
    if shape.inferred:
        assumptions.append(f"shape inferred from N: {shape.layers} layers x hidden {shape.hidden}")

    global_batch = workload.global_batch or default_global_batch(workload.params, workload.seq_len,
                                                                 data_parallel=dp, micro_batch=workload.micro_batch)
    if workload.global_batch is None:
        typical = configured.typical_global_batch(workload.params, workload.seq_len)
        why = "typical for the size" if global_batch == typical else \
            f"one micro-batch per data-parallel rank: {dp} ranks x {workload.micro_batch}, above the typical {typical}"
        assumptions.append(f"global batch {global_batch} sequences ({why}; set --global-batch)")
    if workload.tp * workload.pp > 1 and gpus % (workload.tp * workload.pp):
        raise ValueError(f"{gpus} GPUs do not split into --tp {workload.tp} x --pp {workload.pp} x data parallel")

    model_parallel = model_parallel_degree(workload, shape, gpu, gpus, global_batch)
    config_speed = None
    # Per-GPU compute rate.
    if throughput is None and configured.stated(workload):
        config_speed = configured.configured_speed(
            workload, shape, gpu, gpus=gpus, gpus_per_node=hardware.per_node, global_batch=global_batch,
            network_gbps=hardware.network_gbps)
        tps = config_speed.step.tokens_per_s_per_gpu
        mfu, source, detail = tps * fpt.model / (peak * 1e12), "config", config_speed.step.detail()
    elif throughput is None:
        prior = mfu_prior(gpu, matmul_params=shape.matmul_params, precision=workload.precision, gpus=gpus,
                          global_batch=global_batch, recompute_ratio=fpt.model / fpt.hardware,
                          model_parallel=model_parallel)
        mfu, source, detail = prior.mfu, "default", prior.detail()
        tps = mfu * peak * 1e12 / fpt.model
    elif throughput.tokens_per_s_per_gpu is not None:
        tps = throughput.tokens_per_s_per_gpu
        mfu, source, detail = tps * fpt.model / (peak * 1e12), throughput.source, throughput.detail
    else:
        assert throughput.mfu is not None
        mfu, source, detail = throughput.mfu, throughput.source, throughput.detail
        tps = mfu * peak * 1e12 / fpt.model

    step_tokens_per_gpu = global_batch * workload.seq_len / gpus
    # With fewer sequences per step than GPUs, GPUs share a sequence (model parallel): a micro-step is the step.
    micro_tokens = min(workload.micro_batch * workload.seq_len, step_tokens_per_gpu)
    grad_bytes = trainable * memory.weight_bytes(workload.precision)
    network = hardware.network_gbps or comms.default_network_gbps(gpu)
    if config_speed is not None:  # the step model already counts every exchange
        comm = comms.CommModel(1.0, 0.0, 0.0, config_speed.step.step_s)
    else:
        comm = comms.scaling_efficiency(
            gpu=gpu, gpus_per_node=hardware.per_node, nodes=hardware.node_count, network_gbps=network,
            grad_bytes=grad_bytes, step_compute_s=step_tokens_per_gpu / tps,
            microbatch_compute_s=micro_tokens / tps, full_shard=workload.sharding in ("zero3", "fsdp"),
            model_parallel=model_parallel,
        )
    effective_tps = tps * comm.efficiency
    wall_s = workload.tokens / (effective_tps * gpus)
    wall_range = gpu_range = None
    if throughput is None:
        low, high = configured.CONFIG_RATIO_BAND if config_speed is not None else PRIOR_RATIO_BAND
        wall_range = (wall_s * low / 3600, wall_s * high / 3600)
        gpu_range = (wall_range[0] * gpus, wall_range[1] * gpus)
    model_flops = fpt.model * workload.tokens
    return Estimate(
        params=workload.params, tokens=workload.tokens, flops=model_flops, gpu=gpu.name, gpus=gpus,
        nodes=hardware.node_count,
        memory_gb_per_gpu=MemoryBreakdown(mem.weights, mem.gradients, mem.optimizer, mem.activations,
                                          mem.overhead, total), attention=workload.attention,
        fits=fits, min_gpus=needed, mfu=mfu, mfu_source=source, tokens_per_s_per_gpu=effective_tps,
        scaling_efficiency=comm.efficiency, wall_hours=wall_s / 3600, gpu_hours=wall_s * gpus / 3600,
        wall_hours_range=wall_range, gpu_hours_range=gpu_range, mode="train", gpus_per_node=hardware.per_node,
        gpu_memory_gb=gpu.memory_gb,
        precision=workload.precision, peak_tflops=peak, trainable_params=trainable, model_flops=model_flops,
        hardware_flops=fpt.hardware * workload.tokens, flops_per_token=fpt.model, effective_mfu=mfu * comm.efficiency,
        seq_len=workload.seq_len, global_batch=global_batch, micro_batch=workload.micro_batch,
        sharding=workload.sharding, mfu_detail=detail, fit_hint=None if fits else _fit_hint(workload, hardware),
        assumptions=assumptions, mfu_ref=throughput.ref if throughput is not None else None,
        parallel=configured.step_summary(config_speed) if config_speed is not None else None,
    )


def _inference_estimate(workload: Workload, hardware: Hardware, throughput: Throughput | None) -> Estimate:
    """Serving (gpuplan.estimating.serving): memory by weight format, KV cache and working set; decode bound by
    reading the weights and KV cache once per step, prefill by FLOPs; `tokens` is the number to generate."""
    gpu, gpus = hardware.gpu, hardware.gpus
    shape = shape_of(workload.params, workload.architecture)
    serving.check_gpu_count(shape, gpus, hardware.per_node)
    fmt = workload.weight_format or workload.precision
    compute_precision = "fp8" if fmt == "fp8" and gpu.peak_tflops("fp8") else workload.precision
    peak = _peak(gpu, compute_precision)
    mem = serving_memory_of(workload, shape, gpus)
    # Decode reads the weights and KV cache, never the prefill's attention scores: time it on the fused working set.
    timed = mem if workload.attention != "eager" else serving_memory_of(replace(workload, attention="flash"), shape,
                                                                       gpus)
    fits = mem.total <= gpu.memory_gb
    needed = min_gpus(workload, gpu, gpus_per_node=hardware.per_node)
    fpt = flops.forward_flops_per_token(shape, workload.context // 2)
    speed = serving.decode_speed(shape, timed, bandwidth_gbps=gpu.memory_bandwidth_gbps, peak_tflops=peak,
                                 gpus=gpus, batch=workload.batch, context=workload.context,
                                 forward_flops_per_token=fpt)
    scaling = 1.0 if gpus == 1 else 0.85  # tensor-parallel all-reduces per layer (assumed; see README)
    total_tps = speed.tokens_per_s * scaling
    source, detail = "default", (f"decode bound by {speed.bound} at {serving.DECODE_BANDWIDTH_EFFICIENCY:.0%} "
                                 "of peak bandwidth")
    if throughput is not None:
        per_gpu = throughput.tokens_per_s_per_gpu
        if per_gpu is None:
            assert throughput.mfu is not None
            per_gpu = throughput.mfu * peak * 1e12 / fpt
        total_tps, source, detail = per_gpu * gpus, throughput.source, throughput.detail
    tps = total_tps / gpus
    mfu = tps * fpt / (peak * 1e12)
    wall_s = workload.tokens / total_tps
    assumptions = [f"batch {workload.batch} sequences of {workload.context} tokens of context"]
    if fmt != workload.precision:
        assumptions.append(f"weights stored as {fmt}" + (f" (group size {workload.group_size})" if fmt == "int4"
                                                         else "") + "; embeddings and output head in 16-bit")
    if shape.experts:
        assumptions.append(f"mixture of experts: all {shape.experts} experts in memory, {shape.experts_per_token} "
                           "per token in the FLOPs")
    return Estimate(
        params=workload.params, tokens=workload.tokens, flops=fpt * workload.tokens, gpu=gpu.name, gpus=gpus,
        nodes=hardware.node_count,
        memory_gb_per_gpu=MemoryBreakdown(mem.weights, 0.0, 0.0, mem.activations, mem.overhead, mem.total,
                                          kv_cache=mem.kv_cache),
        attention=workload.attention,
        fits=fits, min_gpus=needed, mfu=mfu, mfu_source=source, tokens_per_s_per_gpu=tps,
        scaling_efficiency=scaling, wall_hours=wall_s / 3600, gpu_hours=wall_s * gpus / 3600, mode="inference",
        gpus_per_node=hardware.per_node, gpu_memory_gb=gpu.memory_gb, precision=workload.precision,
        peak_tflops=peak, trainable_params=0, model_flops=fpt * workload.tokens,
        hardware_flops=fpt * workload.tokens, flops_per_token=fpt, effective_mfu=mfu * scaling,
        seq_len=workload.context, global_batch=workload.batch, micro_batch=workload.batch, sharding="none",
        mfu_detail=detail, fit_hint=None if fits else _fit_hint(workload, hardware), assumptions=assumptions,
    )

