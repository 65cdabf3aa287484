"""Peak dense BF16/FP16 tensor TFLOP/s per GPU, for the price-per-TFLOP sort.

Read minimally from gpuplan/data/gpus.csv (csv module, fast path). The estimator's GPU table (gpuplan/gpus.py)
owns these specs; until it is merged this module reads the same CSV the estimator reads, mapping its row names
onto the canonical catalog names. GPUs whose datasheet figure is not confirmed there have no entry (None).
"""

from __future__ import annotations

import csv
from pathlib import Path

GPUS_CSV = Path(__file__).resolve().parent.parent / "data" / "gpus.csv"
PEAK_COLUMN = "bf16_fp16_tensor_tflops_dense"

# gpus.csv row name -> canonical catalog name, where they differ.
_CSV_NAME_TO_CANONICAL = {
    "H100 SXM": "H100",
    "H100 PCIe": "H100-PCIe",
    "A100 80GB SXM": "A100-80GB",
    "A100 40GB": "A100-40GB",
    "V100": "V100-16GB",
}


def peak_tflops_table(path: Path = GPUS_CSV) -> dict[str, float]:
    """Canonical GPU name -> peak dense BF16/FP16 TFLOP/s, for the GPUs that have the figure."""
    table: dict[str, float] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            value = (row.get(PEAK_COLUMN) or "").strip()
            if value:
                table[_CSV_NAME_TO_CANONICAL.get(row["gpu"], row["gpu"])] = float(value)
    return table
