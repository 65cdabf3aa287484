"""How a training job is laid out over its GPUs, and what each parallel dimension sends over which link.

`ParallelConfig` is what the user states (or the defaults choose): tensor parallel `tp`, pipeline parallel `pp`
(with its schedule), data parallel over the rest with a ZeRO/FSDP `sharding`, the micro-batch, the global batch,
activation recomputation, GPUs per node and the inter-node network. The volumes are the published ones:

- Tensor parallel (Megatron-LM, Shoeybi et al. 2019, sec. 3; Narayanan et al. 2021, sec. 3.3): two all-reduces of
  the b·s·h activations per layer in the forward pass and two in the backward pass (with sequence parallelism a
  reduce-scatter + all-gather pair of the same volume: Korthikanti et al. 2022, sec. 4.2.2); a full recomputation
  repeats the forward two. They sit on the critical path (no overlap in Megatron-LM 2021/2022).
- Pipeline parallel: a micro-batch's b·s·h activations go to the next stage forward and its gradient back
  (Narayanan et al. 2021, sec. 3.2); the bubble is (p - 1) micro-batch slots per step for 1F1B and (p - 1)/v for
  the interleaved schedule with v chunks per GPU (same paper, sec. 2.2, eq. 1-2).
- Data parallel: a ring all-reduce moves 2·(d-1)/d of the local gradient bytes (Patarasuk & Yuan 2009); ZeRO-1/2
  reduce-scatter the gradients and all-gather the weights, the same volume (Rajbhandari et al. 2020, sec. 7);
  ZeRO-3/FSDP all-gather the weights in forward and again in backward and reduce-scatter the gradients: 3·(d-1)/d,
  every micro-batch (Zhao et al. 2023, PyTorch FSDP, sec. 3.3), overlapped layer by layer with compute.
- Links: inside a node NVLink (or PCIe) at 80% of the unidirectional peak (nccl-tests all_reduce busbw on DGX H100
  ~360-370 GB/s of 450); a ring that spans nodes runs at the NICs of its members in each node, at 70% of the line
  rate (comms.NETWORK_EFFICIENCY; ring_bus_bytes_per_s), a pipeline send at the sending GPU's own NIC share. The
  inter-node network comes from `--interconnect` or the GPU's usual cloud instance (comms.default_network_gbps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.estimating import comms
from gpuplan.estimating.layout import CLI_NAMES, SCHEDULES, layout_problems
from gpuplan.hardware.gpus import GpuSpec

# Named inter-node fabrics, Gbit/s per node of 8 GPUs: InfiniBand NDR 8 x 400 (DGX H100 SuperPOD) and HDR 8 x 200
# (DGX A100 / Selene), AWS EFA on p5 (3200) and p4d (400), and plain Ethernet.
INTERCONNECTS = {"ib-ndr": 3200.0, "ib-hdr": 1600.0, "efa-p5": 3200.0, "efa-p4d": 400.0, "roce-1600": 1600.0,
                 "eth-100": 100.0, "eth-25": 25.0}
COLLECTIVE_LATENCY_S = 20e-6  # per NCCL collective launch over NVLink/IB (nccl-tests small-message latency)
INTERLEAVED_CHUNKS = 2  # virtual stages per GPU when the schedule is interleaved (Megatron's usual setting)


@dataclass(frozen=True, slots=True)
class ParallelConfig:
    """How one job runs. `dp` is derived: gpus / (tp x pp)."""

    gpus: int
    gpus_per_node: int
    tp: int = 1
    pp: int = 1
    sharding: str = "none"
    micro_batch: int = 1
    global_batch: int = 1
    recompute: str = "none"
    schedule: str = "1f1b"
    network_gbps: float | None = None
    # Share of layers fully recomputed when recompute is "full" (torchtitan's "selective layer" checkpoints every
    # second layer: 0.5); 1.0 for ordinary full checkpointing.
    recompute_share: float = 1.0
    # Model chunks per GPU in the interleaved schedule (Megatron's virtual pipeline size).
    virtual_stages: int = INTERLEAVED_CHUNKS
    # Tensor-parallel exchanges overlapped with the GEMMs they feed (Megatron-Core + Transformer Engine's
    # userbuffers, `--tp-comm-overlap`) instead of waiting on the critical path.
    tp_overlap: bool = False
    # ZeRO-1/2's parameter all-gather overlaps the next step's first forward instead of following the backward
    # (Megatron's --overlap-param-gather with the distributed optimizer, NeMo's overlap_param_sync).
    dp_overlap: bool = False

    def __post_init__(self) -> None:
        problems = []
        if self.tp < 1 or self.pp < 1:
            problems.append("--tp and --pp must be at least 1")
        elif self.gpus % (self.tp * self.pp):
            problems.append(f"{self.gpus} GPUs do not split into --tp {self.tp} x --pp {self.pp} x data parallel")
        if self.schedule not in SCHEDULES:
            problems.append(f"schedule must be one of {', '.join(SCHEDULES)}")
        problems += layout_problems(CLI_NAMES, tp=self.tp, sharding=self.sharding, recompute=self.recompute,
                                    activation_checkpointing=False, tp_overlap=self.tp_overlap,
                                    dp_overlap=self.dp_overlap)
        if self.micro_batch < 1 or self.global_batch < 1:
            problems.append("micro-batch and global batch must be at least 1")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per optimizer step (at least one)."""
        return max(1, math.ceil(self.global_batch / (self.micro_batch * self.dp)))


def parse_interconnect(value: str) -> float:
    """A named fabric (INTERCONNECTS) or Gbit/s per node (`3200`, `400g`, `100gbps`) as Gbit/s; ValueError
    names what is accepted."""
    key = value.strip().lower()
    if key in INTERCONNECTS:
        return INTERCONNECTS[key]
    try:
        gbps = float(key.removesuffix("gbps").removesuffix("g"))
    except ValueError:
        raise ValueError(f"interconnect {value!r}: give one of {', '.join(INTERCONNECTS)} or Gbit/s per node") \
            from None
    if not 0 < gbps <= 1e6:
        raise ValueError(f"interconnect {value!r}: Gbit/s per node must be in (0, 1000000]")
    return gbps


def intra_node_bytes_per_s(gpu: GpuSpec) -> float:
    """Achievable bytes/s per GPU for a collective inside a node."""
    return comms.intra_node_gbps(gpu) * 1e9


def inter_node_bytes_per_s(network_gbps: float, gpus_per_node: int) -> float:
    """Achievable bytes/s of one GPU's own share of its node's NICs (a point-to-point send across nodes)."""
    return network_gbps / 8 * 1e9 * comms.NETWORK_EFFICIENCY / max(1, gpus_per_node)


def ring_bus_bytes_per_s(gpu: GpuSpec, *, network_gbps: float, gpus_per_node: int, members_per_node: int) -> float:
    """Bus bandwidth of a ring collective that spans nodes, with `members_per_node` of its ranks in each node.

    NCCL runs one ring per NIC (its channels), each ring through every rank, crossing the network once per node;
    each ring carries its share of the buffer, so the crossing links together move the collective at the NICs of
    the group's members in that node: with all 8 GPUs of a node in the group, the node's whole network (busbw of
    multi-node all_reduce on DGX nodes approaches the node's total NIC rate: nccl-tests doc/PERFORMANCE.md defines
    busbw as the per-link figure to compare with the hardware peak), never more than NVLink inside the node.
    """
    members = max(1, min(members_per_node, gpus_per_node))
    return min(intra_node_bytes_per_s(gpu), inter_node_bytes_per_s(network_gbps, gpus_per_node) * members)


def ring_seconds(nbytes: float, ranks: int, *, spans_nodes: bool, gpu: GpuSpec, network_gbps: float,
                 gpus_per_node: int, factor: float = 2.0, members_per_node: int = 1) -> float:
    """A ring collective of `nbytes` per rank over `ranks` GPUs: factor·(r-1)/r·nbytes at the bus bandwidth
    (factor 2 for an all-reduce, 1 for a reduce-scatter or an all-gather); across nodes `members_per_node` of the
    ranks share each node (ring_bus_bytes_per_s)."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    rate = (ring_bus_bytes_per_s(gpu, network_gbps=network_gbps, gpus_per_node=gpus_per_node,
                                 members_per_node=members_per_node)
            if spans_nodes else intra_node_bytes_per_s(gpu))
    return factor * (ranks - 1) / ranks * nbytes / rate + COLLECTIVE_LATENCY_S


def tp_seconds_per_layer(config: ParallelConfig, *, tokens: float, hidden: int, act_bytes: float, gpu: GpuSpec,
                         network_gbps: float, forward_passes: float) -> float:
    """Tensor-parallel all-reduces of one layer for one micro-batch: 2 per forward pass (`forward_passes` = 1, or
    more with recomputation) and 2 in the backward pass."""
    if config.tp <= 1:
        return 0.0
    spans = config.tp > config.gpus_per_node
    one = ring_seconds(tokens * hidden * act_bytes, config.tp, spans_nodes=spans, gpu=gpu,
                       network_gbps=network_gbps, gpus_per_node=config.gpus_per_node,
                       members_per_node=config.gpus_per_node)
    return one * 2 * (forward_passes + 1)


def pp_p2p_seconds(config: ParallelConfig, *, tokens: float, hidden: int, act_bytes: float,
                   network_gbps: float) -> float:
    """Send of one micro-batch's activations to the next stage and of its gradient back (one stage boundary;
    split over the tp ranks, which each send their slice when sequence parallel)."""
    if config.pp <= 1:
        return 0.0
    nbytes = tokens * hidden * act_bytes / config.tp
    rate = inter_node_bytes_per_s(network_gbps, config.gpus_per_node)
    return 2 * (nbytes / rate + COLLECTIVE_LATENCY_S)


def bubble_slots(config: ParallelConfig) -> float:
    """Idle micro-batch slots per step of the pipeline schedule."""
    if config.pp <= 1:
        return 0.0
    chunks = max(1, config.virtual_stages) if config.schedule == "interleaved" else 1
    return (config.pp - 1) / chunks


def dp_spans_nodes(config: ParallelConfig) -> bool:
    """Whether a GPU's data-parallel group reaches beyond its node: a ring over more GPUs than one node holds runs
    at the NIC rate (NCCL's rings cross the network once per node, each GPU on its own NIC share)."""
    return config.dp > 1 and config.gpus > config.gpus_per_node


def dp_seconds(config: ParallelConfig, *, local_param_bytes: float, gpu: GpuSpec, network_gbps: float) -> float:
    """One data-parallel exchange of the local gradients: an all-reduce (none), reduce-scatter + all-gather (ZeRO-1/2)
    or, for ZeRO-3/FSDP, the all-gathers and reduce-scatter of one micro-batch."""
    factor = 3.0 if config.sharding in ("zero3", "fsdp") else 2.0
    # Ranks are laid out tensor-parallel first (Megatron's order), so a node holds gpus_per_node / tp of one
    # data-parallel group (one, when a model replica fills the node).
    members = min(config.dp, max(1, config.gpus_per_node // config.tp))
    return ring_seconds(local_param_bytes, config.dp, spans_nodes=dp_spans_nodes(config), gpu=gpu,
                        network_gbps=network_gbps, gpus_per_node=config.gpus_per_node, factor=factor,
                        members_per_node=members)
