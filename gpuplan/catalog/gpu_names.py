"""Canonical GPU names and the mapping from cloud names (instance types, accelerator names) to them.

The canonical names are shared with the estimator's GPU table (gpuplan.hardware.gpus): the planner joins offers to
GPU specs by this name, so every offer in the catalog must carry one of CANONICAL_GPUS.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpuplan.errors import UserError

# Which clouds the catalog prices is not known here: the providers declare it (priced_by_catalog), and the callers
# above them pass the registry's `catalog_clouds()` down (gpuplan.providers.registry).

CANONICAL_GPUS: tuple[str, ...] = (
    "H100", "H100-PCIe", "H100-NVL", "H200", "B200", "B300", "A100-80GB", "A100-40GB", "A100-PCIe", "V100-16GB",
    "V100-32GB", "L40S", "L4", "A10G", "A10", "T4", "T4G", "P100", "P4", "MI300X",
)

# AWS instance family (the part of the type before the dot) -> GPU. Families not listed (g3 M60, p2 K80,
# g4ad Radeon, inf/trn accelerators) carry no GPU gpuplan can plan for and are skipped by the refresh.
AWS_FAMILY_GPU: dict[str, str] = {
    "p3": "V100-16GB",
    "p3dn": "V100-32GB",
    "p4d": "A100-40GB",
    "p4de": "A100-80GB",
    "p5": "H100",  # p5.48xlarge and p5.4xlarge
    "p5e": "H200",
    "p5en": "H200",
    "p6-b200": "B200",
    "p6-b300": "B300",
    "g4dn": "T4",
    "g5": "A10G",
    "g5g": "T4G",
    "g6": "L4",
    "g6e": "L40S",
    "g6f": "L4",  # fractional L4 (g6f.2xlarge = 1/4)
    "gr6": "L4",
}

# GCP machine series with fixed GPUs (the type name up to its size suffix) -> GPU.
GCP_SERIES_GPU: dict[str, str] = {
    "a2-highgpu": "A100-40GB",
    "a2-megagpu": "A100-40GB",
    "a2-ultragpu": "A100-80GB",
    "a3-highgpu": "H100",
    "a3-megagpu": "H100",  # H100-MEGA: same H100 SXM, more network bandwidth
    "a3-edgegpu": "H100",
    "a3-ultragpu": "H200",
    "a4-highgpu": "B200",
    "g2-standard": "L4",
}

# GCP accelerator type (API name) -> GPU, and back (the GCP provider attaches `nvidia-tesla-t4` etc. to n1).
GCP_ACCELERATOR_GPU: dict[str, str] = {
    "nvidia-tesla-t4": "T4",
    "nvidia-tesla-v100": "V100-16GB",
    "nvidia-tesla-p100": "P100",
    "nvidia-tesla-p4": "P4",
    "nvidia-tesla-a100": "A100-40GB",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-h100-80gb": "H100",
    "nvidia-h100-mega-80gb": "H100",
    "nvidia-h200-141gb": "H200",
    "nvidia-b200": "B200",
    "nvidia-l4": "L4",
}
# Accelerators a user attaches to an n1 host (the others come with their a2/a3/a4/g2 machine type).
GCP_N1_ACCELERATORS: frozenset[str] = frozenset(
    {"nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4"}
)

# SkyPilot's accelerator names, as used in the shipped snapshot.
SNAPSHOT_ACCELERATOR_GPU: dict[str, str] = {
    "A100": "A100-40GB",
    "A100-80GB": "A100-80GB",
    "H100": "H100",
    "H100-MEGA": "H100",
    "H200": "H200",
    "B200": "B200",
    "B300": "B300",
    "L4": "L4",
    "L40S": "L40S",
    "A10G": "A10G",
    "A10": "A10",
    "T4": "T4",
    "T4g": "T4G",
    "V100": "V100-16GB",
    "V100-32GB": "V100-32GB",
    "P100": "P100",
    "P4": "P4",
}

_CANONICAL_BY_KEY = {name.upper(): name for name in CANONICAL_GPUS}
_CANONICAL_SET = frozenset(CANONICAL_GPUS)


def aws_instance_gpu(instance_type: str) -> str | None:
    """The canonical GPU of an AWS instance type (`p4d.24xlarge` -> A100-40GB), None if not a planned GPU."""
    return AWS_FAMILY_GPU.get(instance_type.split(".", 1)[0])


def gcp_machine_series(machine_type: str) -> str:
    """`a2-highgpu-8g` -> `a2-highgpu`, `a3-edgegpu-8g-nolssd` -> `a3-edgegpu`, `n1-standard-8` -> `n1-standard`."""
    parts = machine_type.split("-")
    return "-".join(parts[:2])


def gcp_machine_gpu(machine_type: str) -> str | None:
    """The canonical GPU built into a GCP machine type, None for hosts without fixed GPUs (n1)."""
    return GCP_SERIES_GPU.get(gcp_machine_series(machine_type))


def aws_gpuinfo_gpu(name: str, memory_mib: float | None) -> str | None:
    """Canonical GPU from EC2 `GpuInfo.Gpus[].Name` + `MemoryInfo.SizeInMiB` (a fallback for unmapped types)."""
    key = name.strip().upper()
    if key == "A100":
        return "A100-80GB" if (memory_mib or 0) > 50_000 else "A100-40GB"
    if key == "V100":
        return "V100-32GB" if (memory_mib or 0) > 20_000 else "V100-16GB"
    if key == "H100" and memory_mib is not None:
        return "H100"
    return _CANONICAL_BY_KEY.get(key)


def resolve_gpu_name(text: str) -> str:
    """THE GPU name resolver: user text -> the GPU table's canonical name, the same in a spec, `estimate`,
    `prices`, `plan` and a launch.

    It is the GPU table's own look-up (gpuplan.hardware.gpus.resolve_gpu, which `estimate` calls directly):
    any spelling of the table, case, spaces, dashes and `nvidia`/`tesla` ignored; `A100` is the 40 GB part and
    `V100` the 16 GB one, as AWS, GCP and SkyPilot name them. New spellings go into data/gpus.csv's aliases, so
    every command learns them at once. A name the table does not know is a UserError with the close matches; a GPU
    the table knows but no cloud of the catalog rents (RTX 4090) resolves: `rented` says so.
    """
    from gpuplan.hardware.gpus import resolve_gpu

    try:
        return resolve_gpu(text).name
    except ValueError as exc:
        raise UserError(str(exc)) from None


def rented(name: str) -> bool:
    """Does any cloud of the catalog rent this canonical GPU? (RTX 4090, H800: no.)"""
    return name in _CANONICAL_SET


def not_rented_message(names: frozenset[str] | set[str], clouds: Sequence[str]) -> str:
    """The answer for GPUs the table knows but the catalog does not price: not "unknown GPU"."""
    listed = ", ".join(sorted(names))
    return (f"no cloud in the catalog ({', '.join(clouds)}) rents {listed}; "
            f"GPUs the catalog prices: {', '.join(CANONICAL_GPUS)}")


def resolve_gpus(text: str) -> frozenset[str]:
    """`h100`, `A100`, `L4,T4` -> canonical names through `resolve_gpu_name`; an unknown name is a UserError.

    Names the catalog does not price are kept (the caller says "no cloud rents it", see `not_rented_message`).
    """
    names = {resolve_gpu_name(raw) for raw in text.split(",") if raw.strip()}
    if not names:
        raise UserError("--gpu needs at least one GPU name")
    return frozenset(names)


def resolve_clouds(text: str, known: Sequence[str]) -> tuple[str, ...]:
    """`aws,gcp` -> ("aws", "gcp") in the order of `known` (the clouds the catalog prices, from the registry's
    `catalog_clouds()`); an unknown cloud is a UserError."""
    clouds = {c.strip().lower() for c in text.split(",") if c.strip()}
    if not clouds:
        raise UserError(f"--cloud needs a cloud name; known: {', '.join(known)}")
    unknown = sorted(clouds - set(known))
    if unknown:
        raise UserError(f"unknown cloud {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    return tuple(c for c in known if c in clouds)


_REGION_PATTERN = re.compile(r"^[a-z0-9*?-]+$")


def compile_region_patterns(text: str) -> tuple[str, ...]:
    """Validate `us-*,europe-west4` style glob patterns (letters, digits, '-', '*', '?'); else a UserError.

    fnmatch accepts almost anything, so a typo like `us-[east` would silently match nothing; region names only
    ever contain lower-case letters, digits and dashes, so anything else is refused up front.
    """
    patterns = tuple(p.strip().lower() for p in text.split(",") if p.strip())
    if not patterns:
        raise UserError(f"malformed region pattern {text!r}: expected e.g. 'us-*' or 'us-east-1,europe-west4'")
    for pattern in patterns:
        if not _REGION_PATTERN.match(pattern):
            raise UserError(
                f"malformed region pattern {pattern!r}: use letters, digits, '-', '*' and '?' (e.g. 'us-*')"
            )
    return patterns

# Memory per GPU (GB as marketed) of GCP accelerator types: neither the billing SKUs nor acceleratorTypes say it.
GCP_ACCELERATOR_MEMORY_GB: dict[str, float] = {
    "nvidia-tesla-t4": 16, "nvidia-tesla-v100": 16, "nvidia-tesla-p100": 16, "nvidia-tesla-p4": 8,
    "nvidia-tesla-a100": 40, "nvidia-a100-80gb": 80, "nvidia-h100-80gb": 80, "nvidia-h100-mega-80gb": 80,
    "nvidia-h200-141gb": 141, "nvidia-b200": 180, "nvidia-l4": 24,
}

