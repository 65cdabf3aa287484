"""Load the price snapshot shipped in gpuplan/data/prices (csv module only: this is on the fast path).

AWS rows are used as they are: one row per (instance type, zone id), the spot price that zone's, the zone's type
derived from its id (gpuplan.catalog.zones; use1-atl2-az1 is a Local Zone). For GCP the composed file is used: GCP
bills the GPUs apart from the host VM, and gcp_gpu_vms_composed.csv already holds host + accelerator per zone,
including n1-standard hosts with T4/V100/P100/P4 attached (scripts/compose_gcp_n1.py; see the data README).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from gpuplan.catalog.gpu_memory import vendor_gpu_memory_gb
from gpuplan.catalog.gpu_names import SNAPSHOT_ACCELERATOR_GPU, aws_instance_gpu, gcp_machine_gpu
from gpuplan.catalog.offer import Offer

PRICES_DIR = Path(__file__).resolve().parent.parent / "data" / "prices"
SNAPSHOT_FILES: dict[str, str] = {"aws": "aws_gpu_instances.csv", "gcp": "gcp_gpu_vms_composed.csv"}


@dataclass(frozen=True)
class ShippedInfo:
    """When and from where the shipped snapshot comes (data/prices/snapshot.json)."""

    fetched_at: dt.datetime
    source: str
    note: str


def shipped_info(prices_dir: Path = PRICES_DIR) -> ShippedInfo:
    meta = json.loads((prices_dir / "snapshot.json").read_text())
    fetched_at = dt.datetime.fromisoformat(meta["fetched_at"].replace("Z", "+00:00"))
    return ShippedInfo(fetched_at=fetched_at, source=meta["source"], note=meta.get("fetched_at_note", ""))


def money(text: str | None) -> Decimal | None:
    """A price cell -> Decimal; empty, zero or unparsable means "unknown" (the a4 host is 0.0 upstream)."""
    if not text:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value > 0 else None


def _number(text: str | None) -> float | None:
    return float(text) if text else None


def canonical_gpu(instance_type: str, accelerator: str) -> str | None:
    """The canonical GPU of a snapshot row: the instance type decides, the accelerator name is the fallback."""
    # EC2 instance types (p4d.24xlarge) and GCE machine types (a2-highgpu-1g) never share a name.
    by_type = aws_instance_gpu(instance_type) or gcp_machine_gpu(instance_type)
    return by_type or SNAPSHOT_ACCELERATOR_GPU.get(accelerator)


def load_shipped(clouds: frozenset[str] | None = None, prices_dir: Path = PRICES_DIR,
                 info: ShippedInfo | None = None) -> list[Offer]:
    """Parse the shipped snapshot into Offers; rows whose GPU has no canonical name raise (a data bug)."""
    info = info or shipped_info(prices_dir)
    offers: list[Offer] = []
    for cloud, filename in SNAPSHOT_FILES.items():
        if clouds is not None and cloud not in clouds:
            continue
        with (prices_dir / filename).open(newline="") as handle:
            for row in csv.DictReader(handle):
                offers.append(_offer_from_row(row, info))
    return offers


def _offer_from_row(row: dict[str, str], info: ShippedInfo) -> Offer:
    cloud, instance_type = row["cloud"], row["instance_type"]
    gpu = canonical_gpu(instance_type, row["accelerator_name"])
    if gpu is None:
        raise ValueError(f"snapshot row {instance_type!r} ({row['accelerator_name']!r}) has no canonical GPU name")
    count = float(row["accelerator_count"])
    total_memory = _number(row["gpu_memory_gib"])
    reported = None if total_memory is None else total_memory / max(count, 1.0)
    per_gpu_memory = vendor_gpu_memory_gb(gpu, count, reported, "GiB")
    return Offer(
        cloud=cloud,
        region=row["region"],
        zone=row["availability_zone"] or None,
        instance_type=instance_type,
        gpu=gpu,
        gpu_count=count,
        gpu_memory_gb=per_gpu_memory,
        vcpus=_number(row["vcpus"]),
        memory_gb=_number(row["memory_gib"]),
        price_per_hour=money(row["price_per_hour"]),
        spot_price_per_hour=money(row["spot_price_per_hour"]),
        arch=row["arch"] or None,
        source=info.source,
        fetched_at=info.fetched_at,
    )
