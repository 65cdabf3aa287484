"""Data-parallel communication: how much of the compute time the gradient exchange adds, as a scaling efficiency.

The model (documented in the README's Estimate section):
- Volume: a ring all-reduce moves 2·(p-1)/p x B bytes per rank for B bytes of gradients (Patarasuk & Yuan
  2009, bandwidth-optimal all-reduce); ZeRO-3/FSDP moves 3·(p-1)/p x B (all-gather in forward and backward,
  reduce-scatter of gradients: Rajbhandari et al. 2020, section 7) and does it every micro-batch.
- Hierarchical, as NCCL does it: inside a node over NVLink (or PCIe), then across nodes where the node's
  NICs carry 2·(n-1)/n x B in total. When a step has fewer sequences than GPUs, groups of m GPUs share one
  model replica (tensor/pipeline/context parallel, as Megatron-LM and Llama 3 do); the data-parallel
  collective then runs over gpus/m replicas, and a replica spanning k nodes puts only B/k on each node's NICs.
  Used for a measured or given per-GPU rate only; the step model (throughput.py) times its own exchanges.
- Achievable bus bandwidth: 80% of the unidirectional NVLink peak (nccl-tests all_reduce busbw on DGX H100 is
  ~360-370 GB/s of 450) and 70% of the NIC line rate; PCIe-only GPUs get 16 GB/s (half of Gen4 x16 peak).
- Overlap: DDP/FSDP overlap gradient buckets with the backward pass of the *last* micro-batch only (gradient
  accumulation communicates once per step), and the last bucket (~10% of the traffic) never overlaps.
- Latency: each all-reduce bucket (25 MB, PyTorch DDP's default bucket_cap_mb) pays ~5 us per tree hop,
  2·log2(ranks) hops (NCCL's tree all-reduce).
Scaling efficiency = compute / (compute + exposed communication); 1.0 on one GPU. It falls as nodes are added
because the per-GPU share of a fixed global batch shrinks while the gradient volume does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.hardware.gpus import GpuSpec

NVLINK_EFFICIENCY = 0.8
NETWORK_EFFICIENCY = 0.7
PCIE_GBPS = 16.0  # GB/s achievable per GPU over PCIe Gen4 x16 (32 GB/s peak per direction)
BUCKET_BYTES = 25e6
HOP_LATENCY_S = 5e-6
EXPOSED_TAIL = 0.1

# Default network per node in Gbit/s when the user does not say: the clouds' flagship instance of each GPU
# (AWS EC2 instance pages: p5 3200 Gbps EFA, p6-b200 3200 Gbps, p4d 400 Gbps, p3dn 100 Gbps, g5/g6e 48xlarge
# 100-400 Gbps). Clusters with 8x400 Gb/s InfiniBand (DGX SuperPOD) pass network_gbps explicitly.
DEFAULT_NETWORK_GBPS = {"blackwell": 3200.0, "hopper": 3200.0, "ampere": 400.0, "cdna3": 3200.0}
FALLBACK_NETWORK_GBPS = 100.0


def default_network_gbps(gpu: GpuSpec) -> float:
    """Gbit/s of inter-node network per node assumed for `gpu` (PCIe ampere parts get the fallback)."""
    if gpu.generation == "ampere" and not gpu.form_factor.startswith("SXM"):
        return FALLBACK_NETWORK_GBPS
    return DEFAULT_NETWORK_GBPS.get(gpu.generation, FALLBACK_NETWORK_GBPS)


@dataclass(frozen=True)
class CommModel:
    """What the scaling efficiency was computed from (kept for the output's explanation)."""

    efficiency: float
    comm_s_per_step: float
    exposed_s_per_step: float
    compute_s_per_step: float


def intra_node_gbps(gpu: GpuSpec) -> float:
    """Achievable GB/s per GPU inside a node (NVLink figures are bidirectional totals, so halve them)."""
    if gpu.nvlink_gbps:
        return gpu.nvlink_gbps / 2 * NVLINK_EFFICIENCY
    return PCIE_GBPS


def allreduce_seconds(nbytes: float, *, gpu: GpuSpec, gpus_per_node: int, nodes: int, network_gbps: float,
                      factor: float = 2.0, model_parallel: int = 1) -> float:
    """Seconds for one hierarchical data-parallel collective of a model with `nbytes` of gradients.

    `factor` = 2 for an all-reduce, 3 for ZeRO-3's all-gathers plus reduce-scatter. With a model-parallel degree
    m (GPUs sharing one replica), each GPU holds nbytes/m; a replica spanning k = m/gpus_per_node nodes means each
    node's NICs carry only 1/k of the gradients, and replicas inside one node reduce over NVLink first.
    """
    ranks = gpus_per_node * nodes
    model_parallel = max(1, min(model_parallel, ranks))
    dp = ranks // model_parallel
    if dp <= 1 or nbytes <= 0:
        return 0.0
    seconds = 0.0
    replicas_per_node = gpus_per_node // model_parallel if model_parallel < gpus_per_node else 1
    if replicas_per_node > 1:
        shard = nbytes / model_parallel
        seconds += factor * (replicas_per_node - 1) / replicas_per_node * shard / (intra_node_gbps(gpu) * 1e9)
    dp_nodes = dp // replicas_per_node
    if dp_nodes > 1:
        nodes_per_replica = max(1.0, model_parallel / gpus_per_node)
        node_bytes_per_s = network_gbps / 8 * 1e9 * NETWORK_EFFICIENCY
        seconds += factor * (dp_nodes - 1) / dp_nodes * nbytes / nodes_per_replica / node_bytes_per_s
    buckets = max(1.0, nbytes / model_parallel / BUCKET_BYTES)
    seconds += buckets * 2 * math.log2(dp) * HOP_LATENCY_S
    return seconds


def scaling_efficiency(*, gpu: GpuSpec, gpus_per_node: int, nodes: int, network_gbps: float,
                       grad_bytes: float, step_compute_s: float, microbatch_compute_s: float,
                       full_shard: bool, model_parallel: int = 1) -> CommModel:
    """Scaling efficiency of one optimizer step of data-parallel training (see the module docstring)."""
    if gpus_per_node * nodes <= 1:
        return CommModel(1.0, 0.0, 0.0, step_compute_s)
    def collective(factor: float) -> float:
        return allreduce_seconds(grad_bytes, gpu=gpu, gpus_per_node=gpus_per_node, nodes=nodes,
                                 network_gbps=network_gbps, factor=factor, model_parallel=model_parallel)

    if full_shard:
        per_micro = collective(3.0)
        micro_steps = max(1.0, step_compute_s / microbatch_compute_s) if microbatch_compute_s > 0 else 1.0
        exposed_micro = max(EXPOSED_TAIL * per_micro, per_micro - microbatch_compute_s)
        comm, exposed = per_micro * micro_steps, exposed_micro * micro_steps
    else:
        comm = collective(2.0)
        backward = microbatch_compute_s * 2 / 3
        exposed = max(EXPOSED_TAIL * comm, comm - backward)
    efficiency = step_compute_s / (step_compute_s + exposed) if step_compute_s > 0 else 1.0
    return CommModel(efficiency, comm, exposed, step_compute_s)
