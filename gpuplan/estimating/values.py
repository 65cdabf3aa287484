"""The estimate's values: what to train (Workload), where (Hardware), a measured rate (Throughput) and the answer.

Plain frozen dataclasses that validate themselves, kept apart from the arithmetic in gpuplan.estimating.estimate
so that the layout search and the planner can share them without importing the whole estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplan.estimating import serving
from gpuplan.estimating.architecture import Architecture
from gpuplan.estimating.layout import CLI_NAMES, KERNELS, SCHEDULES, layout_problems, recompute_of
from gpuplan.estimating.memory import ATTENTIONS, OPTIMIZERS, SHARDINGS
from gpuplan.estimating.shape import Shape
from gpuplan.hardware.gpus import PRECISIONS, GpuSpec

MODES = ("train", "inference")
THROUGHPUT_SOURCES = ("user", "measured", "bench", "calibrated", "model")
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
    # How the job runs (the step model, gpuplan.estimating.throughput, times it; None = layout.py's default):
    # tensor and pipeline parallel sizes, the recomputation (None: from activation_checkpointing), the pipeline
    # schedule, the inter-node network in Gbit/s per node and whether TP exchanges overlap the GEMMs.
    # None: not stated; the estimate fills it with layout.default_layout's default and lists it under "assumed".
    tp: int | None = None
    pp: int | None = None
    recompute: str | None = None
    schedule: str | None = None
    interconnect_gbps: float | None = None
    tp_overlap: bool = False
    dp_overlap: bool = False
    # How the memory-bound ops run: "fused" (Megatron/NeMo/TE, torch.compile) or "eager" (plain PyTorch without
    # torch.compile: kernels.EAGER_PASSES); None = layout.DEFAULT_KERNELS, listed under "assumed".
    kernels: str | None = None
    # Serving: the stored weights' format (None = the precision) and the int4 quantization group size.
    weight_format: str | None = None
    group_size: int = serving.DEFAULT_GROUP_SIZE

    def __post_init__(self) -> None:
        problems = layout_problems(CLI_NAMES, tp=self.tp or 1, sharding=self.sharding, recompute=self.recompute,
                                   activation_checkpointing=self.activation_checkpointing,
                                   tp_overlap=self.tp_overlap, dp_overlap=self.dp_overlap)
        if (self.tp or 1) < 1 or (self.pp or 1) < 1:
            problems.append("tp and pp must be at least 1")
        if self.weight_format is not None and self.weight_format not in serving.WEIGHT_FORMATS:
            problems.append(f"weight format must be one of {', '.join(serving.WEIGHT_FORMATS)}")
        if self.group_size <= 0:
            problems.append("group size must be greater than zero")
        if self.schedule is not None and self.schedule not in SCHEDULES:
            problems.append(f"schedule must be one of {', '.join(SCHEDULES)}")
        if self.kernels is not None and self.kernels not in KERNELS:
            problems.append(f"kernels must be one of {', '.join(KERNELS)}")
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
        # One option under two names: --activation-checkpointing is --recompute full, whichever was said.
        object.__setattr__(self, "recompute", recompute_of(self.recompute, self.activation_checkpointing))
        object.__setattr__(self, "activation_checkpointing", self.recompute == "full")

    @property
    def model_parallel(self) -> int:
        """GPUs one stated replica spans (tp x pp; 1 when not stated)."""
        return (self.tp or 1) * (self.pp or 1)


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
    """A measured or given throughput to use instead of the step model: tokens/s per GPU, or an MFU, and where it
    came from.

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
    # With the model: the range 80% of published runs fell in (run_overhead.RUN_RATIO_BAND); None otherwise.
    wall_hours_range: tuple[float, float] | None = None
    gpu_hours_range: tuple[float, float] | None = None
    # Explanation.
    mode: str = "train"
    gpus_per_node: int = 1
    gpu_memory_gb: float = 0.0
    # The whole run's hours over the steps' (run_overhead.RunFactor's total); 1.0 for a measured or given
    # throughput. run_mfu_pull is its part that pulls the step MFU toward the typical published run's.
    run_overhead: float = 1.0
    run_mfu_pull: float = 1.0
    weight_format: str | None = None  # serving: the stored weights' format when not the precision (int4, ...)
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
    kernels: str = "fused"  # how the step model timed the memory-bound ops (Workload.kernels, default filled)
    mfu_detail: str = ""
    fit_hint: str | None = None
    assumptions: list[str] = field(default_factory=list)
    mfu_ref: dict[str, Any] | None = None  # the bench record or calibration behind mfu_source, if any
    # mfu_source "model": the layout and the step's seconds by part (configured.step_summary).
    parallel: dict[str, Any] | None = None


def lora_params(shape: Shape, rank: int) -> int:
    """Adapter parameters of LoRA on the attention projections q, k, v, o (Hu et al. 2021's setting)."""
    h, kv = shape.hidden, shape.kv_dim
    per_layer = rank * ((h + h) + 2 * (h + kv) + (h + h))
    return shape.layers * per_layer
