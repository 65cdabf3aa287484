"""The shipped snapshot, normalised: every row maps to a canonical GPU, GCP prices are host + accelerator."""

from __future__ import annotations

import csv
from decimal import Decimal

import pytest

from gpuplan.catalog import CANONICAL_GPUS, Catalog
from gpuplan.catalog.gpu_names import (
    aws_gpuinfo_gpu,
    aws_instance_gpu,
    gcp_machine_gpu,
    resolve_gpus,
)
from gpuplan.catalog.snapshot import PRICES_DIR, load_shipped, shipped_clouds
from gpuplan.errors import UserError


def _rows(name: str) -> list[dict[str, str]]:
    with (PRICES_DIR / name).open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_shipped_row_becomes_an_offer_with_a_canonical_gpu() -> None:
    offers = load_shipped()
    shipped = shipped_clouds()
    expected = sum(len(_rows(info.file)) for info in shipped.values())
    # 288 n1 rows composed by scripts/compose_gcp_n1.py; 124 Azure rows by scripts/compose_azure_snapshot.py
    assert len(offers) == expected == 1081 + 654 + 288 + 124
    assert {o.gpu for o in offers} <= set(CANONICAL_GPUS)
    assert {o.cloud for o in offers} == set(shipped) == {"aws", "gcp", "azure"}
    # Each cloud's offers carry that cloud's provenance (Azure's comes from another source and date).
    assert all(o.fetched_at == shipped[o.cloud].fetched_at and o.source == shipped[o.cloud].source for o in offers)
    assert shipped["azure"].fetched_at != shipped["aws"].fetched_at == shipped["gcp"].fetched_at
    # The host-only and accelerator-only files are not offers themselves; every host maps to a GPU too.
    for row in _rows("gcp_gpu_host_vms.csv"):
        assert gcp_machine_gpu(row["instance_type"]) in CANONICAL_GPUS, row["instance_type"]


@pytest.mark.parametrize(("instance_type", "gpu"), [
    ("p4d.24xlarge", "A100-40GB"), ("p4de.24xlarge", "A100-80GB"), ("p5.48xlarge", "H100"), ("p5.4xlarge", "H100"),
    ("p5e.48xlarge", "H200"), ("p5en.48xlarge", "H200"), ("p6-b200.48xlarge", "B200"),
    ("p6-b300.48xlarge", "B300"), ("p3.2xlarge", "V100-16GB"), ("p3dn.24xlarge", "V100-32GB"),
    ("g5.xlarge", "A10G"), ("g6.xlarge", "L4"), ("g6e.xlarge", "L40S"), ("g4dn.xlarge", "T4"),
    ("g5g.xlarge", "T4G"), ("g6f.2xlarge", "L4"),
])
def test_aws_instance_families_map_to_canonical_gpus(instance_type: str, gpu: str) -> None:
    assert aws_instance_gpu(instance_type) == gpu
    offers = [o for o in load_shipped(frozenset({"aws"})) if o.instance_type == instance_type]
    assert offers and {o.gpu for o in offers} == {gpu}


@pytest.mark.parametrize(("machine_type", "gpu"), [
    ("a2-highgpu-1g", "A100-40GB"), ("a2-ultragpu-8g", "A100-80GB"), ("a3-highgpu-8g", "H100"),
    ("a3-megagpu-8g", "H100"), ("a3-ultragpu-8g", "H200"), ("a4-highgpu-8g", "B200"), ("g2-standard-4", "L4"),
    ("a3-edgegpu-8g-nolssd", "H100"),
])
def test_gcp_machine_series_map_to_canonical_gpus(machine_type: str, gpu: str) -> None:
    assert gcp_machine_gpu(machine_type) == gpu


def test_other_cloud_names_and_user_aliases() -> None:
    assert aws_gpuinfo_gpu("A100", 81920) == "A100-80GB"
    assert aws_gpuinfo_gpu("A100", 40960) == "A100-40GB"
    assert aws_gpuinfo_gpu("T4g", 16384) == "T4G"
    assert aws_gpuinfo_gpu("M60", 8192) is None
    assert resolve_gpus("h100") == {"H100"}
    assert resolve_gpus("A100") == {"A100-40GB"}  # the one resolver: A100 is the 40 GB part everywhere
    assert resolve_gpus("l4, t4g") == {"L4", "T4G"}
    with pytest.raises(UserError, match="unknown GPU 'K80'"):
        resolve_gpus("K80")


def test_gcp_composed_price_is_host_plus_accelerator_in_the_same_zone() -> None:
    hosts = {(r["instance_type"], r["availability_zone"]): r for r in _rows("gcp_gpu_host_vms.csv")}
    accels = {(r["accelerator_name"], r["accelerator_count"], r["availability_zone"]): r
              for r in _rows("gcp_accelerators.csv")}
    offers = {(o.instance_type, o.zone): o for o in load_shipped(frozenset({"gcp"}))}
    checked = 0
    for (machine, zone), offer in offers.items():
        if machine.startswith("n1-"):
            continue  # checked by test_gcp_n1_hosts_are_k_sixteenths_of_n1_standard_16_plus_the_gpus
        host = hosts[(machine, zone)]
        accel = accels[(host["accelerator_name"], host["accelerator_count"], zone)]
        for field, value in (("price_per_hour", offer.price_per_hour),
                             ("spot_price_per_hour", offer.spot_price_per_hour)):
            if not host[field] or not accel[field] or Decimal(host[field]) == 0:
                assert value is None  # e.g. the a4 host's price is unknown (0.0) upstream
                continue
            assert value == pytest.approx(Decimal(host[field]) + Decimal(accel[field]), abs=Decimal("0.00002"))
            checked += 1
    assert checked > 1200
    a2 = offers[("a2-highgpu-1g", "us-central1-a")]
    assert a2.price_per_hour == Decimal("3.67339")  # 0.73948 host + 2.93391 A100, as the data README says


def test_gcp_n1_hosts_are_k_sixteenths_of_n1_standard_16_plus_the_gpus() -> None:
    """T4/V100/P100/P4 on n1 hosts: the smallest n1-standard with 4 vCPUs per GPU, priced k/16 of the source's
    n1-standard-16 row (n1 is billed per vCPU and GB at one regional rate, 3.75 GB per vCPU), plus the GPUs."""
    n1 = {r["availability_zone"]: r for r in _rows("gcp_n1_hosts.csv")}
    accels = {(r["accelerator_name"], r["accelerator_count"], r["availability_zone"]): r
              for r in _rows("gcp_accelerators.csv")}
    offers = [o for o in load_shipped(frozenset({"gcp"})) if o.instance_type.startswith("n1-")]
    assert {o.gpu for o in offers} == {"T4", "V100-16GB", "P100", "P4"} and len(offers) == 288
    names = {"V100-16GB": "V100"}
    for offer in offers:
        assert offer.instance_type == f"n1-standard-{4 * int(offer.gpu_count)}" and offer.vcpus == 4 * offer.gpu_count
        accel = accels[(names.get(offer.gpu, offer.gpu), str(int(offer.gpu_count)), offer.zone)]
        host = Decimal(n1[offer.zone]["price_per_hour"]) * Decimal(4 * int(offer.gpu_count)) / 16
        assert offer.price_per_hour == pytest.approx(host + Decimal(accel["price_per_hour"]), abs=Decimal("0.00001"))
    t4 = next(o for o in offers if o.instance_type == "n1-standard-4" and o.zone == "us-central1-a" and o.gpu == "T4")
    assert t4.price_per_hour == Decimal("0.54")  # 0.19 host (4/16 of 0.76) + 0.35 T4


def test_units_per_gpu_memory_and_fractional_gpus() -> None:
    offers = load_shipped()
    p5 = next(o for o in offers if o.instance_type == "p5.48xlarge")
    assert (p5.gpu_count, p5.gpu_memory_gb, p5.total_gpu_memory_gb, p5.vcpus) == (8.0, 80.0, 640.0, 192.0)
    g6f = next(o for o in offers if o.instance_type == "g6f.2xlarge")
    assert g6f.gpu_count == 0.25 and g6f.gpu_memory_gb == 6.0  # a quarter of the L4's 24 GB (AWS: 5.59 GiB)
    assert g6f.price_per_gpu() == g6f.price_per_hour * 4
    g5g = next(o for o in offers if o.instance_type == "g5g.xlarge")
    assert g5g.arch == "arm64"
    assert all(o.price_per_hour is None or o.price_per_hour > 0 for o in offers)


def test_catalog_select_filters() -> None:
    """Loading speed is measured by bench/prices_speed.py; this checks what each filter keeps."""
    catalog = Catalog.load()
    assert len(catalog.offers) == 1735 + 288 + 124
    h100 = catalog.select(gpus={"H100"})
    assert h100 and all(o.gpu == "H100" for o in h100)
    spot = catalog.select(spot=True, max_price=5)
    assert spot and all(o.spot_price_per_hour is not None and o.spot_price_per_hour <= 5 for o in spot)
    eight = catalog.select(min_gpus=8, min_gpu_memory_gb=80, regions=("us-*",), clouds={"aws"})
    assert eight and all(o.gpu_count >= 8 and (o.gpu_memory_gb or 0) >= 80 and o.region.startswith("us-")
                         and o.cloud == "aws" for o in eight)
    with pytest.raises(UserError):
        catalog.select(gpus={"K80"})
