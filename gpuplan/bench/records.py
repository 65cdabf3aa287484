"""Bench records in the store: save one after a completed run, list them, and find the best for an estimate.

torch-free: `estimate` imports this (only when a database exists) to look up a measured MFU. SQLAlchemy and
the models are imported inside the functions, which callers reach only after deciding to open the store.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.bench.runner import BenchResult
    from gpuplan.store.models import Benchmark


@dataclass(frozen=True)
class BenchMatch:
    """The bench record an estimate uses, and how well it matches.

    `transferred`: measured on another GPU type (its MFU is applied to the target GPU's peak), or in another
    precision or sequence length; `proxy_layers`: the bench ran only that many of the model's layers.
    `note` says all of that in words, for the estimate's output.
    """

    bench_id: int
    mfu: float
    tokens_per_s: float
    gpu: str
    precision: str
    seq_len: int
    transferred: bool
    proxy_layers: int | None
    note: str


def save_result(session: Session, result: BenchResult) -> Benchmark:
    """Insert the finished bench (the caller commits); config_json keeps every measured field."""
    from gpuplan.store.models import Benchmark

    row = Benchmark(
        host=result.host, device=result.device, device_name=result.device_name, gpu=result.gpu,
        model_name=result.model_name, model_signature=result.model_signature, params=result.params,
        layers=result.layers, precision=result.precision, seq_len=result.seq_len,
        micro_batch=result.micro_batch, steps=result.steps, compiled=result.compiled,
        tokens_per_s=result.tokens_per_s, samples_per_s=result.samples_per_s,
        step_time_p50_s=result.step_time_p50_s, step_time_p90_s=result.step_time_p90_s,
        achieved_tflops=result.achieved_tflops, peak_tflops=result.peak_tflops, mfu=result.mfu,
        peak_memory_gb=result.peak_memory_gb, torch_version=result.torch_version,
        config_json=json.dumps(asdict(result)),
    )
    session.add(row)
    session.flush()
    return row


def bench_to_dict(row: Benchmark) -> dict[str, Any]:
    """The stable JSON form of a stored bench (`gpuplan bench list --json`)."""
    extra = json.loads(row.config_json) if row.config_json else {}
    return {
        "id": row.id, "created_at": row.created_at, "host": row.host, "device": row.device,
        "device_name": row.device_name, "gpu": row.gpu, "model": row.model_name,
        "model_signature": row.model_signature, "params": row.params, "layers": row.layers,
        "full_layers": extra.get("full_layers"), "precision": row.precision, "seq_len": row.seq_len,
        "micro_batch": row.micro_batch, "steps": row.steps, "compiled": row.compiled,
        "tokens_per_s": row.tokens_per_s, "samples_per_s": row.samples_per_s,
        "step_time_p50_s": row.step_time_p50_s, "step_time_p90_s": row.step_time_p90_s,
        "achieved_tflops": row.achieved_tflops, "peak_tflops": row.peak_tflops, "mfu": row.mfu,
        "peak_memory_gb": row.peak_memory_gb, "torch_version": row.torch_version, "run_id": row.run_id,
    }


def list_benchmarks(session: Session, limit: int | None = None) -> list[Benchmark]:
    """Newest first."""
    from sqlalchemy import select

    from gpuplan.store.models import Benchmark

    query = select(Benchmark).order_by(Benchmark.created_at.desc(), Benchmark.id.desc())
    if limit:
        query = query.limit(limit)
    return list(session.scalars(query))


def find_matching_bench(session: Session, *, gpu: str, signature: str, precision: str,
                        seq_len: int | None) -> BenchMatch | None:
    """The best bench with a measured MFU for this model on `gpu`, else on another GPU (transferred).

    Only GPU benches with an MFU (measured against a known peak) qualify; a CPU bench's MFU says nothing about
    a GPU. Ranking: same GPU type, then same precision, then same sequence length (closest), then the full
    model over a shallow proxy, then the newest. Anything short of a full match is labelled `transferred`.
    """
    from sqlalchemy import select

    from gpuplan.store.models import Benchmark

    rows = list(session.scalars(
        select(Benchmark).where(Benchmark.model_signature == signature, Benchmark.gpu.is_not(None),
                                Benchmark.mfu.is_not(None), Benchmark.mfu > 0)
    ))
    if not rows:
        return None

    def full_layers(row: Benchmark) -> int | None:
        return json.loads(row.config_json).get("full_layers") if row.config_json else None

    def proxy(row: Benchmark) -> int | None:
        full = full_layers(row)
        return row.layers if full is not None and row.layers is not None and row.layers < full else None

    def rank(row: Benchmark) -> tuple[Any, ...]:
        seq_gap = abs(row.seq_len - seq_len) if seq_len else 0
        return (row.gpu == gpu, row.precision == precision, -seq_gap, proxy(row) is None, row.created_at, row.id)

    best = max(rows, key=rank)
    same_gpu, same_precision = best.gpu == gpu, best.precision == precision
    same_seq = not seq_len or best.seq_len == seq_len
    differences = []
    if not same_gpu:
        differences.append(f"on {best.gpu}, MFU applied to {gpu}'s peak")
    if not same_precision:
        differences.append(f"in {best.precision}")
    if not same_seq:
        differences.append(f"at seq-len {best.seq_len}")
    proxy_layers = proxy(best)
    if proxy_layers is not None:
        differences.append(f"{proxy_layers} of {full_layers(best)} layers")
    transferred = not (same_gpu and same_precision and same_seq)
    note = f"bench #{best.id}" + (f" ({'; '.join(differences)})" if differences else "")
    return BenchMatch(bench_id=best.id, mfu=float(best.mfu or 0), tokens_per_s=best.tokens_per_s,
                      gpu=str(best.gpu), precision=best.precision, seq_len=best.seq_len, transferred=transferred,
                      proxy_layers=proxy_layers, note=note)
