"""The GPU table: every name the clouds and users type resolves, figures are sane, unknown names say why."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpuplan.hardware.gpus import PRECISIONS, all_gpus, resolve_gpu

ROOT = Path(__file__).resolve().parents[3]
CANONICAL = ["H100", "H100-PCIe", "H200", "B200", "B300", "A100-80GB", "A100-40GB", "V100-16GB", "V100-32GB",
             "L40S", "L4", "A10G", "A10", "T4", "T4G", "P100", "P4", "RTX4090", "RTX3090", "RTX3060", "RTX4060Ti",
             "MI300X"]


@pytest.mark.parametrize(("alias", "name"), [
    ("H100", "H100"), ("H100-80GB", "H100"), ("H100 SXM", "H100"), ("h100-mega", "H100"), ("H200", "H200"),
    ("A100", "A100-40GB"), ("A100-40GB", "A100-40GB"), ("A100-80GB", "A100-80GB"), ("a100 80gb", "A100-80GB"),
    ("V100", "V100-16GB"), ("V100-32GB", "V100-32GB"), ("L40S", "L40S"), ("L4", "L4"), ("A10G", "A10G"),
    ("T4", "T4"), ("T4g", "T4G"), ("RTX4090", "RTX4090"), ("RTX 4090", "RTX4090"), ("NVIDIA RTX 4090", "RTX4090"),
    ("B200", "B200"), ("B300", "B300"), ("P100", "P100"), ("P4", "P4"), ("MI300X", "MI300X"),
])
def test_aliases_resolve(alias: str, name: str) -> None:
    assert resolve_gpu(alias).name == name


def test_canonical_names_are_the_catalogs() -> None:
    names = [g.name for g in all_gpus()]
    assert set(CANONICAL) <= set(names)
    assert len(names) == len(set(names))


def test_every_cloud_accelerator_name_resolves() -> None:
    """The price snapshot's accelerator names (every cloud snapshot.json ships) all map to a GPU of the table.
    (Source files kept beside them for provenance, e.g. Azure's raw rows, use their source's own columns.)"""
    import json

    prices = ROOT / "gpuplan" / "data" / "prices"
    shipped = json.loads((prices / "snapshot.json").read_text())["clouds"]
    names = set()
    for entry in shipped.values():
        with (prices / entry["file"]).open(newline="") as f:
            names |= {row["accelerator_name"] for row in csv.DictReader(f) if row["accelerator_name"]}
    assert names, "no price files found"
    for name in names:
        assert resolve_gpu(name).memory_gb > 0, name
    assert resolve_gpu("A100").memory_gb == 40


def test_unknown_gpu_lists_close_matches() -> None:
    with pytest.raises(ValueError, match=r"unknown GPU 'H10'; did you mean H100"):
        resolve_gpu("H10")
    with pytest.raises(ValueError, match="known: H100"):
        resolve_gpu("Voodoo5")
    with pytest.raises(ValueError):
        resolve_gpu("  ")


def test_datasheet_figures() -> None:
    h100, a100 = resolve_gpu("H100"), resolve_gpu("A100-80GB")
    assert h100.peak_tflops("bf16") == pytest.approx(989.5)  # half the 1979 "with sparsity"
    assert h100.peak_tflops("fp8") == pytest.approx(1979)
    assert a100.peak_tflops("bf16") == 312 and a100.peak_tflops("tf32") == 156
    assert a100.peak_tflops("fp8") is None  # Ampere has no FP8
    assert resolve_gpu("V100").peak_tflops("bf16") is None and resolve_gpu("V100").peak_tflops("fp16") == 125
    assert resolve_gpu("T4").peak_tflops("fp16") == 65
    with pytest.raises(ValueError, match="unknown precision"):
        h100.peak_tflops("int4")


def test_every_row_is_complete_and_cited() -> None:
    for gpu in all_gpus():
        assert gpu.source, gpu.name
        assert gpu.memory_gb > 0 and (gpu.memory_bandwidth_gbps or 0) > 0, gpu.name
        assert gpu.fp32_tflops, gpu.name
        assert gpu.generation in {"pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna3"}
        if gpu.name != "P4":  # an inference card with no fast 16-bit mode
            assert any(gpu.peak_tflops(p) for p in PRECISIONS if p != "fp32"), gpu.name
        # Dense tensor rates increase with narrower formats where both exist.
        if gpu.tf32_tflops and gpu.bf16_tflops:
            assert gpu.bf16_tflops >= gpu.tf32_tflops
        if gpu.fp8_tflops and gpu.bf16_tflops:
            assert gpu.fp8_tflops >= gpu.bf16_tflops
