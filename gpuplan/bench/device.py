"""The device side of a bench: which device, which autocast dtype, its name, and its peak memory.

Imported only when a bench runs (torch).
"""

from __future__ import annotations

import platform
import resource
import sys
from dataclasses import dataclass

import torch

from gpuplan.errors import UserError


@dataclass(frozen=True)
class DeviceInfo:
    device: torch.device
    kind: str  # "cuda" | "cpu" | "mps"
    name: str  # what the hardware calls itself: "NVIDIA H100 80GB HBM3", the CPU model, ...


def resolve_device(requested: str) -> DeviceInfo:
    """`auto` is the first CUDA device if there is one, else the CPU; asking for a missing GPU is an error."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError(f"--device {requested}: this torch ({torch.__version__}) sees no CUDA device")
        device = torch.device(requested)
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise UserError(f"--device {requested}: only {torch.cuda.device_count()} CUDA device(s) here")
        device = torch.device("cuda", index)
        return DeviceInfo(device, "cuda", torch.cuda.get_device_name(index))
    if requested == "mps":
        if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise UserError("--device mps: this torch sees no Apple GPU")
        return DeviceInfo(torch.device("mps"), "mps", "Apple GPU (MPS)")
    return DeviceInfo(torch.device("cpu"), "cpu", cpu_name())


def cpu_name() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), for the record."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def resolve_precision(requested: str | None, info: DeviceInfo) -> str:
    """Default: bf16 on a GPU that has it, fp16 on older GPUs, fp32 on the CPU (what people train with there)."""
    if requested is not None:
        if requested == "bf16" and info.kind == "cuda" and not torch.cuda.is_bf16_supported():
            raise UserError(f"--precision bf16: {info.name} does not support bfloat16; use fp16")
        return requested
    if info.kind == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "fp32"


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype for mixed precision (weights and optimizer state stay fp32), None for fp32."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)


def synchronize(info: DeviceInfo) -> None:
    if info.kind == "cuda":
        torch.cuda.synchronize(info.device)
    elif info.kind == "mps":
        torch.mps.synchronize()


def reset_peak_memory(info: DeviceInfo) -> None:
    if info.kind == "cuda":
        torch.cuda.reset_peak_memory_stats(info.device)


def peak_memory(info: DeviceInfo) -> tuple[float, str]:
    """(GB, what was measured): CUDA's max allocated bytes, or the whole process's peak RSS on the CPU.

    The CPU figure includes the interpreter and torch itself (~0.3-0.5 GB), so it is an upper bound.
    """
    if info.kind == "cuda":
        return torch.cuda.max_memory_allocated(info.device) / 1e9, "cuda_max_allocated"
    if info.kind == "mps":
        return torch.mps.driver_allocated_memory() / 1e9, "mps_driver_allocated"
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes, Linux kilobytes
    return max_rss * scale / 1e9, "process_peak_rss"


def available_memory_bytes(info: DeviceInfo) -> int | None:
    """Free memory on the device (CUDA) or available RAM (Linux CPU), for a before-we-start sanity check."""
    if info.kind == "cuda":
        free, _total = torch.cuda.mem_get_info(info.device)
        return int(free)
    if info.kind == "cpu":
        try:
            with open("/proc/meminfo", encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
    return None
