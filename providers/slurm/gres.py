"""Does a Slurm partition have the GPUs a job asks for? Read from its nodes' generic resources (GRES).

`sinfo -h -p PARTITION -o %G` prints one line per group of nodes with their GRES
(https://slurm.schedmd.com/sinfo.html: "%G Generic resources (gres) associated with the nodes"), e.g.
`gpu:4`, `gpu:a100:8(S:0-1)`, `gpu:a100:2,gpu:v100:2` or `(null)` for none
(https://slurm.schedmd.com/gres.html). A job asking for N GPUs per node (`--gres=gpu:N`) on a partition whose
nodes have fewer would pend forever or be refused; one on a partition without GPU GRES would run on CPUs.
"""

from __future__ import annotations

import re

_GPU = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:(\d+)")


def gpus_per_node(line: str) -> int:
    """GPUs one node of this `%G` line has (a node may list several GPU types: they add up)."""
    return sum(int(count) for count in _GPU.findall(line.strip()))


def most_gpus(sinfo_output: str) -> int:
    """The most GPUs any node of the partition has (0: no GPU GRES anywhere)."""
    return max((gpus_per_node(line) for line in sinfo_output.splitlines() if line.strip()), default=0)


def missing_gpus(sinfo_output: str, wanted: int, partition: str | None) -> str | None:
    """Why the partition cannot give `wanted` GPUs per node, or None when a node of it can."""
    most = most_gpus(sinfo_output)
    if most >= wanted:
        return None
    where = f"Slurm partition {partition}" if partition else "the default Slurm partition"
    listed = ", ".join(sorted({ln.strip() for ln in sinfo_output.splitlines() if ln.strip()})) or "nothing"
    if most == 0:
        return f"{where} has no GPU GRES (sinfo %G: {listed})"
    return f"{where} has at most {most} GPU(s) per node (sinfo %G: {listed}), not {wanted}"
