"""Regenerate the n1 rows of gpuplan/data/prices/gcp_gpu_vms_composed.csv (run from the repository root).

GCP bills an n1 VM with attached GPUs as host + GPUs (data/prices/README.md). The host follows the rule the live
refresh uses (gpuplan.catalog.refresh_gcp): the smallest n1-standard with at least 4 vCPUs per GPU, so 1, 2, 4, 8
GPUs get n1-standard-4, -8, -16, -32. n1 predefined machines are billed per vCPU and per GB of memory at one rate
per region, and every n1-standard size has 3.75 GB per vCPU (https://cloud.google.com/compute/vm-instance-pricing,
https://cloud.google.com/compute/docs/general-purpose-machines#n1_machines), so an n1-standard-k costs k/16 of the
n1-standard-16 row transcribed in gcp_n1_hosts.csv. The accelerator rows are gcp_accelerators.csv's, per zone.
"""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

PRICES = Path("gpuplan/data/prices")
N1_ACCELERATORS = {"T4": 16, "V100": 16, "P100": 16, "P4": 8}  # GB per GPU as NVIDIA states it
VCPUS_PER_GPU = 4
PLACES = Decimal("0.00001")


def _money(text: str) -> Decimal | None:
    return Decimal(text) if text else None


def main() -> None:
    with (PRICES / "gcp_n1_hosts.csv").open(newline="") as handle:
        hosts = {row["availability_zone"]: row for row in csv.DictReader(handle)}
    composed_path = PRICES / "gcp_gpu_vms_composed.csv"
    with composed_path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        columns = list(reader.fieldnames or [])
        kept = [row for row in reader if not row["instance_type"].startswith("n1-")]
    added = []
    with (PRICES / "gcp_accelerators.csv").open(newline="") as handle:
        for accel in csv.DictReader(handle):
            name, zone = accel["accelerator_name"], accel["availability_zone"]
            host = hosts.get(zone)
            if name not in N1_ACCELERATORS or host is None:
                continue
            count = int(accel["accelerator_count"])
            vcpus = VCPUS_PER_GPU * count
            share = Decimal(vcpus) / Decimal(16)
            prices = []
            for market in ("price_per_hour", "spot_price_per_hour"):
                host_price, gpu_price = _money(host[market]), _money(accel[market])
                total = None if host_price is None or gpu_price is None else host_price * share + gpu_price
                prices.append("" if total is None else str(total.quantize(PLACES).normalize()))
            added.append({**dict.fromkeys(columns, ""), "cloud": "gcp", "instance_type": f"n1-standard-{vcpus}",
                          "accelerator_name": name, "accelerator_count": str(count), "vcpus": f"{vcpus}.0",
                          "memory_gib": f"{vcpus * 3.75}", "gpu_memory_gib": str(N1_ACCELERATORS[name] * count),
                          "price_per_hour": prices[0], "spot_price_per_hour": prices[1], "region": accel["region"],
                          "availability_zone": zone, "arch": "x86_64"})
    added.sort(key=lambda r: (r["instance_type"], r["accelerator_name"], r["availability_zone"]))
    with composed_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(kept + added)
    print(f"{len(added)} n1 rows composed; {len(kept)} other rows kept")


if __name__ == "__main__":
    main()
