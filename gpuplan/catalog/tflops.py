"""Peak dense BF16/FP16 tensor TFLOP/s per GPU, for the price-per-TFLOP sort.

The estimator's GPU table (gpuplan/gpus.py, read from gpuplan/data/gpus.csv) owns these specs and already uses
the catalog's canonical names; this module only picks the 16-bit tensor figure (BF16, else FP16 for GPUs
without BF16 such as V100 and T4). GPUs without a 16-bit tensor figure (P4) have no entry.
"""

from __future__ import annotations

from gpuplan.gpus import all_gpus


def peak_tflops_table() -> dict[str, float]:
    """Canonical GPU name -> peak dense BF16 (else FP16) TFLOP/s, for the GPUs that have the figure."""
    table: dict[str, float] = {}
    for gpu in all_gpus():
        value = gpu.bf16_tflops or gpu.fp16_tflops
        if value:
            table[gpu.name] = value
    return table
