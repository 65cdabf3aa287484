"""The inter-node network a multi-node run gets on each instance type: Gbit/s per node, and over which fabric.

Why: NCCL's all-reduce between nodes runs at the speed of the network the machines really have. A p5.48xlarge
node reaches its peers over 32 EFA interfaces (3,200 Gbit/s; gpuplan requests one per network card), a g5.12xlarge
over one 40 Gbit/s ENA interface, a GCP a3-highgpu-8g over the four GPUDirect-TCPX data NICs gpuplan adds to a
multi-node run (800 Gbit/s), an a2-highgpu-8g over its one 100 Gbit/s interface. Estimating every 8 x H100 node as
a p5 (the estimator's per-GPU default) made a multi-node plan on a type without that fabric look several times
faster than it runs.

The figures are the clouds' published per-instance network bandwidth (each row of data/instance_networks.csv cites
its page; "up to" figures are taken as stated), for the configuration gpuplan launches: on GCP, A4 and A3 Ultra
count one 200 Gbit/s gVNIC because gpuplan does not set up their RDMA NICs. A type missing from the table
returns None and the estimator keeps its per-GPU default.
"""

from __future__ import annotations

import csv
import functools
import io
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceNetwork:
    """One instance type's inter-node network: Gbit/s per node, the fabric (efa, tcpx, tcpxo, ena, gvnic,
    virtio) and the page that states it."""

    instance_type: str
    gbps: float
    fabric: str
    source: str


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, InstanceNetwork]:
    """Parse data/instance_networks.csv once per process (immutable package data, as gpus.csv)."""
    raw = pkgutil.get_data("gpuplan", "data/instance_networks.csv")
    if raw is None:
        raise RuntimeError("gpuplan's data/instance_networks.csv is missing from the installation")
    rows = csv.DictReader(io.StringIO(raw.decode("utf-8")))
    return {r["instance_type"]: InstanceNetwork(r["instance_type"], float(r["gbps"]), r["fabric"], r["source"])
            for r in rows}


def instance_network(instance_type: str | None) -> InstanceNetwork | None:
    """The network of `instance_type`, or None when the table does not know it."""
    return _table().get(instance_type or "")


def inter_node_gbps(instance_type: str | None, nodes: int) -> float | None:
    """Gbit/s per node between the nodes of a `nodes`-node run on `instance_type` (None: one node, or unknown)."""
    found = instance_network(instance_type) if nodes > 1 else None
    return found.gbps if found else None
