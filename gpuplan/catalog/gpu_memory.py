"""GPU memory in one unit: GB as the vendor states it (L4 24, L40S 48, A10G 24, H100 80), converted here only.

What the clouds report differs in unit and in what it counts:
- AWS DescribeInstanceTypes gives `GpuInfo.Gpus[].MemoryInfo.SizeInMiB`, the memory the driver reports as usable
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_GpuDeviceMemoryInfo.html): L4 and A10G 22,888 MiB
  (22.35 GiB), L40S 45,776 MiB (44.7 GiB). The shipped snapshot keeps it as GiB (MiB / 1024).
- GCP's APIs give no figure (acceleratorTypes has none); gpu_names.GCP_ACCELERATOR_MEMORY_GB holds the marketed GB.
- Vendors state the marketed capacity ("NVIDIA L4 ... 24GB", "L40S ... 48GB"), which is what users type for
  `--min-gpu-memory` and what the GPU table (gpuplan/data/gpus.csv, a datasheet cited per row) records.
So a GPU the table knows gets the table's GB (times its fraction for a slice such as g6f's quarter L4); only a GPU
without a table row falls back to the cloud's figure, converted from its unit to decimal GB.
"""

from __future__ import annotations

import functools

BYTES = {"MiB": 2**20, "GiB": 2**30, "GB": 10**9}


def to_gb(value: float, unit: str) -> float:
    """A memory figure in MiB, GiB or GB -> decimal GB (2 places)."""
    if unit not in BYTES:
        raise ValueError(f"unknown memory unit {unit!r}; known: {', '.join(BYTES)}")
    return round(value * BYTES[unit] / 10**9, 2)


def vendor_gpu_memory_gb(gpu: str, fraction: float = 1.0, reported: float | None = None,
                         unit: str = "GiB") -> float | None:
    """Memory of ONE GPU (or of the slice an instance gets, `fraction` < 1) in GB as the vendor states it.

    `reported` is the cloud's per-GPU figure in `unit`, used only when the GPU table has no row for `gpu`.
    """
    share = fraction if 0 < fraction < 1 else 1.0
    stated = _stated_gb(gpu)
    if stated is None:
        return None if reported is None else to_gb(reported, unit)
    return round(stated * share, 2)


@functools.lru_cache(maxsize=64)
def _stated_gb(gpu: str) -> float | None:
    """The GPU table's GB for `gpu` (cached: immutable package data, asked once per snapshot row otherwise)."""
    from gpuplan.hardware.gpus import resolve_gpu

    try:
        return resolve_gpu(gpu).memory_gb
    except ValueError:
        return None
