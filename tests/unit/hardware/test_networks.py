"""The inter-node network table (gpuplan.hardware.networks, data/instance_networks.csv): every row cites a page,
every priced GPU instance type with 8 GPUs is in it, and one node needs no network."""

from __future__ import annotations

import csv
from pathlib import Path

from gpuplan.hardware.networks import _table, instance_network, inter_node_gbps

DATA = Path(__file__).resolve().parents[3] / "gpuplan" / "data"


def test_every_row_cites_its_source_and_says_its_fabric() -> None:
    rows = _table().values()
    assert rows and all(r.source.startswith("https://") and r.gbps > 0 for r in rows)
    assert {r.fabric for r in rows} <= {"efa", "ena", "tcpx", "tcpxo", "gvnic", "virtio"}


def test_every_eight_gpu_type_the_catalog_prices_has_its_network() -> None:
    priced = set()
    for name in ("aws_gpu_instances.csv", "gcp_gpu_vms_composed.csv"):
        with open(DATA / "prices" / name) as fh:
            priced |= {r["instance_type"] for r in csv.DictReader(fh) if float(r["accelerator_count"]) >= 8}
    assert sorted(t for t in priced if instance_network(t) is None) == []


def test_one_node_has_no_inter_node_network() -> None:
    assert inter_node_gbps("p5.48xlarge", 1) is None and inter_node_gbps("p5.48xlarge", 2) == 3200
    assert inter_node_gbps("a3-highgpu-8g", 2) == 800 and inter_node_gbps("unknown.type", 2) is None
