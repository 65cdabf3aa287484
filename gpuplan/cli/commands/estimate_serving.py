"""`gpuplan estimate --mode inference` without `--gpu`: how much memory serving needs, and what it fits on.

The VRAM question ("what do I need to serve a 7B model in fp16?") has an answer without a GPU or a token count:
the memory the model needs at the given batch and context on one GPU, and for the usual serving GPUs the fewest
of them that hold it (counts an instance offers that divide the attention heads: gpuplan.estimating.serving).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import click

from gpuplan.estimating.estimate import Workload, min_gpus, serving_memory_of
from gpuplan.estimating.shape import shape_of
from gpuplan.hardware.gpus import resolve_gpu
from gpuplan.units import format_size

# The GPUs people serve on, smallest first: consumer, workstation and data-centre parts the table has.
SERVING_GPUS = ("L4", "A10G", "RTX4090", "RTX 6000 Ada", "L40S", "A100-40GB", "A100-80GB", "H100", "H200",
                "MI300X", "B200")


@dataclass(frozen=True)
class VramAnswer:
    """Memory to serve one model (GB on a single GPU), and the fewest GPUs of each kind that hold it."""

    mode: str
    params: int
    weight_format: str
    batch: int
    context: int
    memory_gb: dict[str, float]
    fits_on: list[dict[str, Any]] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)


def vram_answer(workload: Workload) -> VramAnswer:
    """The memory breakdown on one GPU and, per serving GPU, the fewest that fit."""
    shape = shape_of(workload.params, workload.architecture)
    mem = serving_memory_of(workload, shape, 1)
    fits_on = []
    for name in SERVING_GPUS:
        try:
            gpu = resolve_gpu(name)
        except ValueError:
            continue
        need = min_gpus(workload, gpu, gpus_per_node=8, max_gpus=64)
        if need is not None:
            per_gpu = serving_memory_of(workload, shape, need).total
            fits_on.append({"gpu": gpu.name, "gpus": need, "memory_gb_per_gpu": round(per_gpu, 2),
                            "gpu_memory_gb": gpu.memory_gb})
    fmt = workload.weight_format or workload.precision
    notes = [f"batch {workload.batch} sequences of {workload.context} tokens of context (set --batch, --context)"]
    if shape.experts:
        notes.append(f"mixture of experts: all {shape.experts} experts are in memory")
    return VramAnswer(
        mode="inference", params=workload.params, weight_format=fmt, batch=workload.batch, context=workload.context,
        memory_gb={"weights": mem.weights, "kv_cache": mem.kv_cache, "activations": mem.activations,
                   "overhead": mem.overhead, "total": mem.total},
        fits_on=fits_on, assumptions=notes,
    )


def as_json(answer: VramAnswer) -> dict[str, Any]:
    return asdict(answer)


def render(answer: VramAnswer) -> None:
    m = answer.memory_gb
    click.echo(f"serving {format_size(answer.params)} parameters, weights {answer.weight_format}")
    click.echo(f"  memory     {m['total']:.1f} GB: weights {m['weights']:.1f}, KV cache {m['kv_cache']:.1f}, "
               f"activations {m['activations']:.1f}, overhead {m['overhead']:.1f} (on one GPU)")
    for i, row in enumerate(answer.fits_on):
        click.echo(f"  {'fits on' if i == 0 else '':10} {row['gpus']} x {row['gpu']} ({row['memory_gb_per_gpu']:.1f} "
                   f"of {row['gpu_memory_gb']:g} GB each)")
    for note in answer.assumptions:
        click.echo(f"  assumed    {note}")
