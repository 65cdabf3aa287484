"""A job spec's `workload` section as an estimate: the adapter plan and launch call.

Duck-typed on gpuplan.jobs.spec.WorkloadSpec (SpecWorkload names what it must have), so the estimator does not
import the job spec, which sits above it.
"""

from __future__ import annotations

from typing import Protocol

from gpuplan.estimating.architecture import Architecture
from gpuplan.estimating.estimate import Estimate, Hardware, Throughput, Workload, estimate
from gpuplan.estimating.parallel import parse_interconnect


class SpecWorkload(Protocol):
    """What the estimator reads from a job spec's workload (gpuplan.jobs.spec.WorkloadSpec has each field).

    Read-only properties, not plain attributes: the spec model is frozen and narrows several of them to Literals,
    which a mutable protocol attribute would refuse (it must accept any str written to it).
    """

    @property
    def params(self) -> int | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def model_config_path(self) -> str | None: ...
    @property
    def total_tokens(self) -> int | None: ...
    @property
    def seq_len(self) -> int | None: ...
    @property
    def global_batch(self) -> int | None: ...
    @property
    def micro_batch(self) -> int | None: ...
    @property
    def precision(self) -> str: ...
    @property
    def optimizer(self) -> str: ...
    @property
    def sharding(self) -> str: ...
    @property
    def activation_checkpointing(self) -> bool: ...
    @property
    def lora(self) -> int | None: ...
    @property
    def attention(self) -> str: ...
    @property
    def tp(self) -> int | None: ...
    @property
    def pp(self) -> int | None: ...
    @property
    def pp_schedule(self) -> str | None: ...
    @property
    def recompute(self) -> str | None: ...
    @property
    def tp_overlap(self) -> bool: ...
    @property
    def dp_overlap(self) -> bool: ...
    @property
    def kernels(self) -> str | None: ...
    @property
    def interconnect(self) -> str | None: ...
    @property
    def throughput(self) -> float | None: ...
    @property
    def mfu(self) -> float | None: ...


def workload_from_job(job_workload: SpecWorkload) -> tuple[Workload, Throughput | None]:
    """The estimate Workload for a job spec's `workload` section, and the user's own throughput if it gives one.

    Reads the model's config.json when the spec names one (the only I/O here); raises ValueError when the workload
    says nothing about the model or the tokens.
    """
    from gpuplan.estimating.architecture import load_hf_config, preset

    arch: Architecture | None = None
    model = job_workload.model
    model_config = job_workload.model_config_path
    if model:
        arch = preset(model)
    elif model_config:
        arch = load_hf_config(model_config)
    params = arch.param_count() if arch is not None else job_workload.params
    tokens = job_workload.total_tokens
    if not params or not tokens:
        raise ValueError("the workload needs a model (params, model or model_config) and tokens")
    seq_len = job_workload.seq_len or (min(arch.max_seq_len, 4096) if arch else 2048)
    interconnect = job_workload.interconnect
    workload = Workload(
        params=int(params), tokens=int(tokens), architecture=arch, seq_len=seq_len,
        global_batch=job_workload.global_batch, micro_batch=job_workload.micro_batch or 1,
        precision=job_workload.precision, optimizer=job_workload.optimizer, sharding=job_workload.sharding,
        activation_checkpointing=job_workload.activation_checkpointing, lora_rank=job_workload.lora,
        attention=job_workload.attention or "flash",
        tp=job_workload.tp, pp=job_workload.pp,
        recompute=job_workload.recompute,
        schedule=job_workload.pp_schedule,
        tp_overlap=job_workload.tp_overlap,
        dp_overlap=job_workload.dp_overlap,
        kernels=job_workload.kernels,
        interconnect_gbps=parse_interconnect(interconnect) if interconnect else None,
    )
    throughput = None
    own_rate = job_workload.throughput
    own_mfu = job_workload.mfu
    if own_rate:
        throughput = Throughput(tokens_per_s_per_gpu=own_rate, source="user",
                                detail="workload.throughput")
    elif own_mfu:
        throughput = Throughput(mfu=own_mfu, source="user", detail="workload.mfu")
    return workload, throughput


def estimate_for_job(job_workload: SpecWorkload, *, gpu: str, gpus_per_node: int, nodes: int,
                     throughput: Throughput | None = None, network_gbps: float | None = None) -> Estimate:
    """The estimate for a job spec's `workload` section on `nodes` x `gpus_per_node` GPUs of type `gpu`.

    The adapter `gpuplan.launching.start` calls. The workload's own `throughput` / `mfu` are the user's numbers and win;
    otherwise `throughput`, else the step model. `network_gbps`: the inter-node network of the instance type the
    run gets (gpuplan.hardware.networks), else the GPU's usual cloud instance.
    """
    from gpuplan.hardware.gpus import resolve_gpu

    workload, own = workload_from_job(job_workload)
    hardware = Hardware(resolve_gpu(gpu), gpus=gpus_per_node * nodes, nodes=nodes, gpus_per_node=gpus_per_node,
                        network_gbps=network_gbps)
    return estimate(workload, hardware, own or throughput)
