"""The estimator's memos in one list, so that a benchmark can start each repeat as cold as a new process.

Each memo is a bounded functools.lru_cache of a pure function of frozen values (its docstring says why it pays):
the model's shape, the splits a layout search tries, a workload's layouts, the fewest GPUs of a memory size, the
recomputation a split needs, a memory breakdown, the FLOPs per token and a layer's (and the output head's) kernel
times. A `gpuplan plan` process starts with all of them empty and fills them during its one plan;
bench/plan_speed.py empties them before each repeat so that it times that, not a warm second call. Nothing in the
product needs to empty them: the answers never change within a process.
"""

from __future__ import annotations

from gpuplan.estimating import estimate, flops, memory, shape, throughput


def forget() -> None:
    """Empty every estimator memo."""
    for memo in (shape.shape_of, estimate._splits, estimate._with_layout, estimate._min_gpus, estimate._fitting,
                 memory.training_memory, flops.training_flops_per_token, throughput._layer_times):
        memo.cache_clear()
