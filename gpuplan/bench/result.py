"""What one bench measured, as a plain dataclass (torch-free, so records and tests can build one)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BenchResult:
    """Everything one bench measured; `gpuplan bench --json` prints these keys."""

    model_name: str
    model_kind: str
    model_signature: str
    params: int
    layers: int | None
    full_layers: int | None
    device: str
    device_name: str
    gpu: str | None
    host: str
    precision: str
    seq_len: int
    micro_batch: int
    steps: int
    warmup: int
    compiled: bool
    tokens_per_s: float
    samples_per_s: float
    step_time_p50_s: float
    step_time_p90_s: float
    step_time_mean_s: float
    flops_per_step: int
    hardware_flops_per_step: int
    attention_flops_per_step: int
    attention_flops_source: str
    achieved_tflops: float
    peak_tflops: float | None
    peak_tflops_source: str | None
    mfu: float | None
    peak_memory_gb: float
    peak_memory_kind: str
    final_loss: float
    torch_version: str
