"""The defaults `gpuplan estimate` and `gpuplan plan` share, so both choose sharding and precision the same way.

Sharding: when the user does not name one, the least sharded strategy of AUTO_SHARDINGS that fits on the fewest
GPUs (a tie goes to the less sharded: less communication) — what `plan --auto-shard` always did, and what `estimate`
now does too. Precision: bf16 on a GPU without bf16 falls back to fp16 with a note (configured.precision_for),
in the estimate itself, so plan, launch and estimate all see it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpuplan.estimating.estimate import Workload, min_gpus
from gpuplan.hardware.gpus import GpuSpec

AUTO_SHARDINGS = ("none", "zero1", "zero2", "zero3")


def fewest_gpus(workload: Workload, gpu: GpuSpec, per_node: int, max_gpus: int,
                strategies: Sequence[str] = AUTO_SHARDINGS) -> tuple[int, str] | None:
    """(GPUs, sharding) that fits on the fewest GPUs of this shape; the least sharded strategy wins a tie."""
    best: tuple[int, str] | None = None
    for sharding in strategies:
        need = min_gpus(workload, gpu, gpus_per_node=per_node, max_gpus=max_gpus, sharding=sharding)
        if need is not None and (best is None or need < best[0]):
            best = (need, sharding)
    return best


def auto_shard(workload: Workload, gpu: GpuSpec, *, gpus: int | None, per_node: int) -> tuple[Workload, str | None]:
    """The workload with the sharding the defaults choose, and the note saying so (None when unchanged).

    With a GPU count: the least sharded strategy that fits on it (none if nothing fits: the answer then says what
    would). Without: the strategy that fits on the fewest GPUs.
    """
    if workload.mode != "train":
        return workload, None
    if gpus is not None:
        for sharding in AUTO_SHARDINGS:
            need = min_gpus(workload, gpu, gpus_per_node=per_node, max_gpus=gpus, sharding=sharding)
            if need is not None and need <= gpus:
                break
        else:
            return workload, None
    else:
        best = fewest_gpus(workload, gpu, per_node, 65536)
        if best is None:
            return workload, None
        sharding = best[1]
    return replace(workload, sharding=sharding), (f"sharding {sharding}: the least sharded strategy that fits "
                                                  "(as plan chooses; set --sharding)")
