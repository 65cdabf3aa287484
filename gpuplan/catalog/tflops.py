"""Peak dense BF16 tensor TFLOP/s per GPU, for the price-per-TFLOP sort.

Taken from the estimator's GPU table (gpuplan.hardware.gpus, parsed from data/gpus.csv with the csv module: cheap enough
for the `prices` fast path). The catalog's canonical names are that table's names, so the lookup is direct.
GPUs without a BF16 tensor mode (T4, V100, P100, P4: no BF16) fall back to their FP16 tensor figure, which is
what mixed-precision training uses on them.
"""

from __future__ import annotations


def peak_tflops_table() -> dict[str, float]:
    """Canonical GPU name -> peak dense BF16 (else FP16) TFLOP/s, for the GPUs that have the figure."""
    from gpuplan.hardware.gpus import all_gpus

    table: dict[str, float] = {}
    for spec in all_gpus():
        value = spec.peak_tflops("bf16") or spec.peak_tflops("fp16")
        if value:
            table[spec.name] = value
    return table
