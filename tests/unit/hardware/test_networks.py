"""The inter-node network table (gpuplan.hardware.networks, data/instance_networks.csv): every row cites a page,
every priced GPU instance type with 8 GPUs is in it, and one node needs no network."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

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


# What Google's machine-type tables state as "Maximum network bandwidth (Gbps)" per VM
# (https://cloud.google.com/compute/docs/accelerator-optimized-machines, also on .../compute/docs/gpus; read
# 2026-11-27 in copies of the tables, see gpuplan/data/README.md). A2/G2/single-NIC A3 use their one NIC whole.
GOOGLE_MACHINE_TABLES = {
    "a2-highgpu-1g": 24, "a2-highgpu-2g": 32, "a2-highgpu-4g": 50, "a2-highgpu-8g": 100, "a2-megagpu-16g": 100,
    "a2-ultragpu-1g": 24, "a2-ultragpu-2g": 32, "a2-ultragpu-4g": 50, "a2-ultragpu-8g": 100,
    "g2-standard-4": 10, "g2-standard-8": 16, "g2-standard-12": 16, "g2-standard-16": 32, "g2-standard-24": 32,
    "g2-standard-32": 32, "g2-standard-48": 50, "g2-standard-96": 100,
    "a3-highgpu-1g": 25, "a3-highgpu-2g": 50, "a3-highgpu-4g": 100,
    # "400: for all other A3 Edge regions" (600 only in asia-south1 and northamerica-northeast2): the lower.
    "a3-edgegpu-8g": 400, "a3-edgegpu-8g-nolssd": 400,
}


def test_gcp_rows_are_the_figures_googles_machine_tables_state() -> None:
    stated = {t: inter_node_gbps(t, 2) for t in GOOGLE_MACHINE_TABLES}
    assert stated == GOOGLE_MACHINE_TABLES
    assert all("accelerator-optimized-machines" in _table()[t].source for t in GOOGLE_MACHINE_TABLES)


def _gbit(performance: str) -> float:
    """EC2's NetworkPerformance text as Gbit/s: "Up to 25 Gigabit" -> 25, "4x 100 Gigabit" -> 400."""
    words = performance.replace("Up to ", "").split()
    return float(words[0].rstrip("x")) * float(words[1]) if words[0].endswith("x") else float(words[0])


def test_every_aws_row_is_what_describe_instance_types_reports(moto_env: dict[str, str], aws_clients: Any) -> None:
    """Each AWS row's Gbit/s is the type's NetworkPerformance and its fabric `efa` exactly when EfaSupported
    (gpuplan asks for EFA on every multi-node run of such a type: providers/aws/network.py wants_efa), as EC2's
    DescribeInstanceTypes answers (moto ships AWS's answers). p3 is retired from moto's list; its rows were read
    elsewhere (data/README.md)."""
    from botocore.exceptions import ClientError

    ec2 = aws_clients("ec2", "us-east-1")
    unlisted = []
    for row in _table().values():
        if "." not in row.instance_type:
            continue  # GCP machine types have no dot
        try:
            [info] = ec2.describe_instance_types(InstanceTypes=[row.instance_type])["InstanceTypes"]
        except ClientError:
            unlisted.append(row.instance_type)
            continue
        network = info["NetworkInfo"]
        assert (row.instance_type, row.gbps) == (row.instance_type, _gbit(network["NetworkPerformance"]))
        assert (row.instance_type, row.fabric) == (row.instance_type, "efa" if network["EfaSupported"] else "ena")
    assert sorted(unlisted) == ["p3.16xlarge", "p3.2xlarge", "p3.8xlarge"]
