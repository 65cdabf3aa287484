"""Load the price snapshot shipped in gpuplan/data/prices (csv module only: this is on the fast path).

Which clouds ship prices, in which file, fetched when and from where, is package data (data/prices/snapshot.json,
`clouds`, keyed by the cloud name a provider declares), so a new cloud adds a file and an entry, no code here.

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
from gpuplan.catalog.gpu_names import SNAPSHOT_ACCELERATOR_GPU, aws_instance_gpu, gcp_machine_gpu, rented
from gpuplan.catalog.offer import Offer

PRICES_DIR = Path(__file__).resolve().parent.parent / "data" / "prices"


@dataclass(frozen=True)
class ShippedInfo:
    """When and from where one cloud's shipped prices come (data/prices/snapshot.json), and their file."""

    fetched_at: dt.datetime
    source: str
    note: str
    file: str = ""


def _info(entry: dict[str, str], default: ShippedInfo | None = None) -> ShippedInfo:
    """One snapshot.json entry; what it leaves out comes from `default` (the snapshot's top level)."""
    when = entry.get("fetched_at")
    if when:
        fetched_at = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
    elif default is not None:
        fetched_at = default.fetched_at
    else:
        raise ValueError("data/prices/snapshot.json has no fetched_at")
    return ShippedInfo(
        fetched_at=fetched_at,
        source=entry.get("source") or (default.source if default else ""),
        note=entry.get("fetched_at_note") or (default.note if default else ""),
        file=entry.get("file", ""),
    )


def shipped_clouds(prices_dir: Path = PRICES_DIR) -> dict[str, ShippedInfo]:
    """Every cloud the package ships prices for (snapshot.json `clouds`), each with its file and provenance; a
    cloud's entry without its own date and source has the snapshot's top-level ones."""
    meta = json.loads((prices_dir / "snapshot.json").read_text())
    top = _info(meta)
    return {cloud: _info(entry, top) for cloud, entry in meta.get("clouds", {}).items()}


def shipped_info(prices_dir: Path = PRICES_DIR, cloud: str | None = None) -> ShippedInfo:
    """The shipped provenance of `cloud` (None: the snapshot's top-level date and source)."""
    if cloud is not None:
        return shipped_clouds(prices_dir)[cloud]
    return _info(json.loads((prices_dir / "snapshot.json").read_text()))


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
    # A file written with gpuplan's own canonical names (Azure's) needs no mapping.
    return by_type or SNAPSHOT_ACCELERATOR_GPU.get(accelerator) or (accelerator if rented(accelerator) else None)


def load_shipped(clouds: frozenset[str] | None = None, prices_dir: Path = PRICES_DIR,
                 shipped: dict[str, ShippedInfo] | None = None) -> list[Offer]:
    """Parse the shipped snapshot into Offers; rows whose GPU has no canonical name raise (a data bug)."""
    shipped = shipped if shipped is not None else shipped_clouds(prices_dir)
    offers: list[Offer] = []
    for cloud, info in shipped.items():
        if clouds is not None and cloud not in clouds:
            continue
        with (prices_dir / info.file).open(newline="") as handle:
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
