"""`resources.gpu: [A100:8, H100:8]`: the GPUs a job may run on, each with its count per node.

SkyPilot users write a candidate set (`accelerators: {A100:8, H100:8}`) and let the cheapest available win.
In gpuplan the first candidate fills `gpu`/`gpus_per_node` (what a one-GPU spec has) and every candidate goes to
`gpu_candidates`; the launch plans each and keeps the lowest total job cost (gpuplan.launching.choose), and the
failover tries the others' offers after the chosen one's.
"""

from __future__ import annotations

from typing import Any


def parse_candidate(text: str) -> tuple[str, int]:
    """`A100:8` -> ("A100", 8); `A100` -> ("A100", 1). ValueError names the bad entry."""
    name, sep, count = str(text).strip().rpartition(":")
    if not sep:
        name, count = str(text).strip(), "1"
    if not name.strip() or not count.strip().isdigit() or int(count) < 1:
        raise ValueError(f"gpu candidate {text!r} must look like A100:8 (a GPU name and a count of 1 or more)")
    return name.strip(), int(count)


def split_candidates(data: dict[str, Any]) -> dict[str, Any]:
    """The resources mapping with `gpu: [..]` turned into gpu, gpus_per_node and gpu_candidates."""
    raw = data["gpu"]
    if not raw:
        raise ValueError("gpu: an empty list; give at least one GPU like A100:8, or leave gpu out")
    if data.get("gpus_per_node") is not None:
        raise ValueError("gpu as a list carries each count (A100:8); leave gpus_per_node out")
    parsed = [parse_candidate(item) for item in raw]
    if len(set(parsed)) != len(parsed):
        raise ValueError("gpu: a candidate is listed twice")
    first_name, first_count = parsed[0]
    return {**data, "gpu": first_name, "gpus_per_node": first_count,
            "gpu_candidates": [f"{n}:{c}" for n, c in parsed]}
