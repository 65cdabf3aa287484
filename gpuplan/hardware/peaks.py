"""From a CUDA device name to a GPU type of the GPU table, and that GPU's peak TFLOP/s (torch-free).

Bench records and calibrations are keyed by the GPU table's canonical name (what `resolve_gpu` returns for
`--gpu` in `estimate`), so a bench on "NVIDIA H100 80GB HBM3" matches `estimate --gpu H100`.
"""

from __future__ import annotations

import re

# CUDA reports marketing names ("NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 4090");
# each pattern maps to an alias the GPU table resolves. Order matters: the more specific pattern first.
_DEVICE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\bH200\b", "H200"),
    (r"\bH100\b.*\bPCIe\b", "H100 PCIe"),
    (r"\bH100\b", "H100"),
    (r"\bA100\b.*80\s*GB", "A100-80GB"),
    (r"\bA100\b", "A100-40GB"),
    (r"\bV100\b.*32\s*GB", "V100-32GB"),
    (r"\bV100\b", "V100"),
    (r"\bL40S\b", "L40S"),
    (r"\bL4\b", "L4"),
    (r"\bA10G\b", "A10G"),
    (r"\bA10\b", "A10"),
    (r"\bT4\b", "T4"),
    (r"RTX\s*4090", "RTX4090"),
    (r"RTX\s*3090", "RTX 3090"),
    (r"\bMI300X\b", "MI300X"),
)


def gpu_alias_from_device_name(device_name: str) -> str | None:
    """The GPU-table alias for a CUDA device name, or None when the GPU is not one we know."""
    for pattern, alias in _DEVICE_PATTERNS:
        if re.search(pattern, device_name, re.IGNORECASE):
            return alias
    return None


def canonical_gpu(name: str | None) -> str | None:
    """The GPU table's canonical name for `name` (an alias or a device name), or None if it is unknown."""
    if not name:
        return None
    from gpuplan.hardware.gpus import resolve_gpu

    for candidate in dict.fromkeys(c for c in (name, gpu_alias_from_device_name(name)) if c):
        try:
            return resolve_gpu(candidate).name
        except ValueError:  # resolve_gpu: unknown name
            continue
    return None


def peak_tflops(gpu: str | None, precision: str) -> float | None:
    """Dense tensor peak of `gpu` in `precision` from the GPU table, or None when the table lacks it."""
    if not gpu:
        return None
    from gpuplan.hardware.gpus import resolve_gpu

    try:
        value = resolve_gpu(gpu).peak_tflops(precision)
    except ValueError:  # unknown GPU or precision
        return None
    return float(value) if value else None
