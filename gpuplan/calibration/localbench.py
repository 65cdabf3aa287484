"""A CPU `gpuplan bench` of this machine standing in for the throughput of a CPU job launched here.

The estimator models GPUs, and GPU bench lookups (gpuplan.calibration.throughput.bench_lookup) rightly never let a CPU
bench stand in for a GPU. A job that runs on this machine's CPU (local provider, no GPU in its resources) has no
GPU to model, but it has something better: a bench of the same model on the same machine. Its measured
tokens/s is the job's throughput, the way `gpuplan bench` promises ("measured throughput").

What must match: the model's signature (same shape), precision, sequence length, the full model (not a
`--layers` proxy), and this host (a bench on another machine says nothing about this one). Preferred: the same
micro-batch (CPU speed depends on it), then the closest, then the newest.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

from gpuplan.estimating.estimate import Throughput

CPU_BENCH_SQL = (
    "SELECT id, host, precision, seq_len, micro_batch, layers, tokens_per_s, created_at, config_json "
    "FROM benchmarks WHERE model_signature = ? AND gpu IS NULL AND device = 'cpu' AND tokens_per_s > 0"
)


@dataclass(frozen=True)
class CpuBench:
    """One stored CPU bench, as the choice needs it."""

    id: int
    host: str | None
    precision: str
    seq_len: int
    micro_batch: int
    layers: int | None
    full_layers: int | None
    tokens_per_s: float
    created_at: str

    @property
    def full_model(self) -> bool:
        return self.layers is None or self.full_layers is None or self.layers >= self.full_layers


def cpu_bench_from_row(row: tuple[Any, ...]) -> CpuBench:
    bench_id, host, precision, seq_len, micro_batch, layers, tps, created_at, config_json = tuple(row)
    try:
        full_layers = json.loads(config_json).get("full_layers") if config_json else None
    except (ValueError, AttributeError):
        full_layers = None
    return CpuBench(int(bench_id), None if host is None else str(host), str(precision), int(seq_len),
                    int(micro_batch), None if layers is None else int(layers), full_layers, float(tps),
                    str(created_at))


def best_cpu_bench(benches: list[CpuBench], *, host: str, precision: str, seq_len: int,
                   micro_batch: int | None) -> CpuBench | None:
    """The bench to use for a CPU job of this shape on `host`, or None."""
    usable = [b for b in benches if b.host == host and b.precision == precision and b.seq_len == seq_len
              and b.full_model]
    if not usable:
        return None

    def rank(b: CpuBench) -> tuple[Any, ...]:
        gap = abs(b.micro_batch - micro_batch) if micro_batch else 0
        return (-gap, b.created_at, b.id)

    return max(usable, key=rank)


def cpu_throughput(db_url: str | None, *, signature: str, precision: str, seq_len: int,
                   micro_batch: int | None, host: str | None = None) -> Throughput | None:
    """This machine's measured tokens/s for the model, as a `bench` Throughput (per node), or None."""
    if db_url is None:
        return None
    from gpuplan.calibration.throughput import _query

    host = host or socket.gethostname()
    rows = _query(db_url, CPU_BENCH_SQL, (signature,))
    best = best_cpu_bench([cpu_bench_from_row(r) for r in rows], host=host, precision=precision,
                          seq_len=seq_len, micro_batch=micro_batch)
    if best is None:
        return None
    note = f"bench #{best.id} (cpu, this machine)"
    if micro_batch and best.micro_batch != micro_batch:
        note = f"bench #{best.id} (cpu, this machine; measured at micro-batch {best.micro_batch})"
    ref = {"bench_id": best.id, "transferred": bool(micro_batch and best.micro_batch != micro_batch),
           "device": "cpu", "host": best.host, "precision": best.precision, "seq_len": best.seq_len,
           "micro_batch": best.micro_batch}
    return Throughput(tokens_per_s_per_gpu=best.tokens_per_s, source="bench", detail=note, ref=ref)
