"""The GPU counts a cloud can give for a node size, indexed without materialising the list (min_gpus searches them)."""

from __future__ import annotations


def valid_count(index: int, gpus_per_node: int) -> int:
    """The index-th GPU count a cloud can give: 1..gpus_per_node on one node, then whole nodes (2, 3, ... nodes).

    Computed, not listed: `min_gpus` binary-searches up to 65,536 GPUs and the planner calls it per GPU shape,
    so materialising the list cost more than the whole plan.
    """
    if index < gpus_per_node:
        return index + 1
    return (index - gpus_per_node + 2) * gpus_per_node


def count_of_counts(gpus_per_node: int, max_gpus: int) -> int:
    """How many valid counts there are up to `max_gpus`."""
    if max_gpus <= gpus_per_node:
        return max(max_gpus, 0)
    return gpus_per_node + max_gpus // gpus_per_node - 1
