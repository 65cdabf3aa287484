"""The GPU table: memory, bandwidth, peak tensor throughput per precision, and the names people use for each GPU.

Read from the package's `data/gpus.csv` (every row cites its vendor datasheet) through the package loader
(pkgutil.get_data, the loader API importlib.resources is built on), so it works from a wheel or a zip. The
canonical `name` of each GPU (H100, A100-40GB, ...) is the one the price catalog uses; `resolve_gpu` also
accepts the clouds' and vendors' spellings (`A100` = the 40 GB part, as AWS and GCP call it; `H100-MEGA` =
GCP's a3-megagpu H100; `T4g`), ignoring case, spaces, dashes and underscores.
"""

from __future__ import annotations

import csv
import functools
import io
import pkgutil
import re
from dataclasses import dataclass, field

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. Throughputs are dense (no 2:4 sparsity), in TFLOP/s; memory in GB as marketed."""

    name: str
    vendor: str
    generation: str  # pascal, volta, turing, ampere, ada, hopper, blackwell, cdna3
    form_factor: str
    memory_gb: float
    memory_bandwidth_gbps: float | None
    fp32_tflops: float | None
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    int8_tops: float | None
    tdp_watts: float | None
    nvlink_gbps: float | None  # total bidirectional GPU-to-GPU bandwidth per GPU, None = PCIe only
    aliases: tuple[str, ...] = field(default=(), compare=False)
    source: str = field(default="", compare=False)

    def peak_tflops(self, precision: str) -> float | None:
        """Peak dense TFLOP/s for matmuls in `precision`; None when the GPU has no such mode.

        fp32 is the CUDA-core rate (PyTorch's default without TF32); tf32/bf16/fp16/fp8 are tensor-core rates.
        """
        key = precision.lower()
        if key not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
        return {
            "fp32": self.fp32_tflops,
            "tf32": self.tf32_tflops,
            "bf16": self.bf16_tflops,
            "fp16": self.fp16_tflops,
            "fp8": self.fp8_tflops,
        }[key]

def _key(name: str) -> str:
    """Normalise a GPU name for lookup: lowercase, no spaces, dashes, underscores; `nvidia`/`tesla` dropped."""
    key = re.sub(r"[\s\-_]+", "", name.strip().lower())
    for prefix in ("nvidia", "tesla", "geforce", "amd", "instinct"):
        if key.startswith(prefix) and len(key) > len(prefix):
            key = key[len(prefix):]
    return key


def _num(text: str | None) -> float | None:
    text = (text or "").strip()
    return float(text) if text else None


@functools.lru_cache(maxsize=1)
def _table() -> tuple[tuple[GpuSpec, ...], dict[str, GpuSpec]]:
    """Parse gpus.csv once per process (cached: the file is immutable package data, not mutable state)."""
    # The package loader's get_data (what importlib.resources uses underneath) works from a wheel or a zip;
    # importlib.resources itself would pull in tempfile/shutil/lzma (~20 ms) on the 150 ms estimate path.
    raw = pkgutil.get_data("gpuplan", "data/gpus.csv")
    if raw is None:  # pragma: no cover - a broken installation
        raise RuntimeError("gpuplan's data/gpus.csv is missing from the installation")
    text = raw.decode("utf-8")
    specs: list[GpuSpec] = []
    index: dict[str, GpuSpec] = {}
    for row in csv.DictReader(io.StringIO(text)):
        aliases = tuple(a.strip() for a in row["aliases"].split(";") if a.strip())
        spec = GpuSpec(
            name=row["gpu"].strip(),
            vendor=row["vendor"].strip(),
            generation=row["generation"].strip(),
            form_factor=row["form_factor"].strip(),
            memory_gb=float(row["memory_gb"]),
            memory_bandwidth_gbps=_num(row["memory_bandwidth_gbps"]),
            fp32_tflops=_num(row["fp32_tflops"]),
            tf32_tflops=_num(row["tf32_tensor_tflops_dense"]),
            fp16_tflops=_num(row["fp16_tensor_tflops_dense"]),
            bf16_tflops=_num(row["bf16_tensor_tflops_dense"]),
            fp8_tflops=_num(row["fp8_tensor_tflops_dense"]),
            int8_tops=_num(row["int8_tensor_tops_dense"]),
            tdp_watts=_num(row["tdp_watts"]),
            nvlink_gbps=_num(row["nvlink_gbps"]),
            aliases=aliases,
            source=row["source"].strip(),
        )
        specs.append(spec)
        for name in (spec.name, *aliases):
            key = _key(name)
            if key in index and index[key] is not spec:  # pragma: no cover - a data error caught by the tests
                raise ValueError(f"gpus.csv: name {name!r} is used by both {index[key].name} and {spec.name}")
            index[key] = spec
    return tuple(specs), index


def all_gpus() -> list[GpuSpec]:
    """Every GPU in the table, in the table's order (newest data-centre parts first)."""
    return list(_table()[0])


def resolve_gpu(name: str) -> GpuSpec:
    """The GPU called `name` (canonical name or alias); ValueError naming the close matches otherwise."""
    if not name or not name.strip():
        raise ValueError("GPU name is empty")
    specs, index = _table()
    key = _key(name)
    if key in index:
        return index[key]
    import difflib  # only on the error path

    close_keys = difflib.get_close_matches(key, index, n=6, cutoff=0.6)
    close: list[str] = []
    for k in close_keys:
        if index[k].name not in close:
            close.append(index[k].name)
    hint = f"; did you mean {', '.join(close[:3])}?" if close else f"; known: {', '.join(s.name for s in specs)}"
    raise ValueError(f"unknown GPU {name!r}{hint}")
