"""A job that asks for GPUs runs on GPUs, or on a CPU only when the user says so (--allow-cpu).

Asked before the offer is planned and before anything is recorded: the provider says whether it can give the
job its GPUs (`Provider.missing_gpus`: this machine has no /dev/nvidia*, a Slurm partition has no GPU GRES). A
GPU spec there is refused with one line (exit 2); with --allow-cpu the job is planned, estimated and recorded as
the CPU job it will really be (no GPU on the run row), so the books and the calibration never count it as an
H100 run.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import UserError
from gpuplan.jobs.spec import JobSpec
from gpuplan.providers.base import Provider


@dataclass(frozen=True)
class GpuCheck:
    """The spec to plan (the CPU version of it under --allow-cpu) and, when it was relabelled, why."""

    spec: JobSpec
    cpu_fallback: bool = False
    note: str | None = None


def wanted_gpus(spec: JobSpec) -> int:
    """GPUs per node the spec asks for (`gpu: H100` alone means one)."""
    res = spec.resources
    return res.gpus_per_node or (1 if res.gpu else 0)


def check_gpus(spec: JobSpec, provider: Provider, *, allow_cpu: bool) -> GpuCheck:
    """Refuse a GPU spec on a provider without its GPUs (UserError, exit 2) unless `allow_cpu`, which turns it
    into a CPU job; anything else passes unchanged."""
    wanted = wanted_gpus(spec)
    why = provider.missing_gpus(wanted) if wanted else None
    if why is None:
        return GpuCheck(spec)
    asked = f"{wanted} x {spec.resources.gpu or 'GPU'} per node"
    if not allow_cpu:
        raise UserError(f"{spec.name} asks for {asked} on {provider.name}, but {why}: launch it where the GPUs "
                        "are (--provider or resources.clouds: aws, gcp, a Slurm partition with GPUs), or pass "
                        "--allow-cpu to run it on the CPU")
    res = spec.resources.model_copy(update={"gpu": None, "gpus_per_node": None})
    return GpuCheck(spec.model_copy(update={"resources": res}), cpu_fallback=True,
                    note=f"--allow-cpu: {why}; {spec.name} runs on the CPU instead of {asked} and is recorded "
                         "as a CPU run")
