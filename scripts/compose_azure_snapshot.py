"""Regenerate gpuplan/data/prices/azure_gpu_vms.csv from azure_source_rows.csv (run from the repository root).

azure_source_rows.csv holds the source's GPU rows verbatim (data/prices/README.md says which file and commit). What a
size holds (GPU, count, vCPUs, RAM) is taken from gpuplan's own table, providers/azure/vm_sizes.py, which cites
Microsoft's size pages, not from the source's columns: the source gives the ND H100 v5 twelve GPUs and the NDm A100
v4 1800 GiB, where Microsoft says 8 and 1900. A source row whose Spot price equals its pay-as-you-go price to the
last digit (every H100 row) is no Spot discount: it is written as "no Spot price" rather than quoted as one.
Rows of sizes the table lacks are left out. Prices are USD per VM-hour, Linux, as the source lists them.
"""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

from gpuplan.providers.azure.vm_sizes import vm_size

PRICES = Path("gpuplan/data/prices")
COLUMNS = ["cloud", "instance_type", "accelerator_name", "accelerator_count", "vcpus", "memory_gib", "gpu_memory_gib",
           "price_per_hour", "spot_price_per_hour", "region", "availability_zone", "arch"]


def main() -> None:
    with (PRICES / "azure_source_rows.csv").open(newline="") as handle:
        source = list(csv.DictReader(handle))
    rows = []
    for row in source:
        size = vm_size(row["InstanceType"])
        if size is None or not row["Price"]:
            continue
        spot = row["SpotPrice"]
        if spot and Decimal(spot) == Decimal(row["Price"]):
            spot = ""
        rows.append({
            "cloud": "azure", "instance_type": row["InstanceType"], "accelerator_name": size.gpu,
            "accelerator_count": f"{size.gpus:.6g}", "vcpus": f"{size.vcpus}.0", "memory_gib": f"{size.memory_gib:g}",
            "gpu_memory_gib": "", "price_per_hour": row["Price"], "spot_price_per_hour": spot,
            "region": row["Region"], "availability_zone": "", "arch": "x86_64",
        })
    rows.sort(key=lambda r: (r["instance_type"], r["region"]))
    with (PRICES / "azure_gpu_vms.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {PRICES / 'azure_gpu_vms.csv'}")


if __name__ == "__main__":
    main()
