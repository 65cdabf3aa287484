"""bench/throughput_accuracy.py: the rows are timed on the GPU their source ran, as the source states it."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))

from throughput_accuracy import TABLES, gpu_of  # noqa: E402

from gpuplan.hardware.gpus import resolve_gpu  # noqa: E402


def test_torchtitan_h100_rows_run_on_the_500w_hbm2e_part_the_benchmark_states() -> None:
    """Issue 33 item 2: torchtitan's H100 benchmark ran 96 GB HBM2e parts at 2.4 TB/s and 500 W whose peak is
    "between SXM and NVL"; they were timed as 700 W SXM H100s (3.35 TB/s, 989.5 TFLOP/s)."""
    rows = [r for r in csv.DictReader(TABLES.open(newline="")) if r["source"] == "torchtitan-h100"]
    assert rows and all(r["gpu"] == "H100-96GB-HBM2e-500W" for r in rows)
    part = gpu_of(rows[0]["gpu"])
    sxm, nvl = resolve_gpu("H100"), resolve_gpu("H100-NVL")
    assert part.memory_bandwidth_gbps == 2400
    assert part.bf16_tflops == pytest.approx((sxm.bf16_tflops + nvl.bf16_tflops) / 2)
    assert part.generation == "hopper" and part.memory_gb == 96
    assert gpu_of("A100-80GB") == resolve_gpu("A100-80GB")
