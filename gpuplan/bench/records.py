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

    from gpuplan.bench.result import BenchResult
    from gpuplan.store.models import Benchmark


@dataclass(frozen=True)
class BenchMatch:
    """The bench record an estimate uses, and how well it matches.

    `transferred`: measured on another GPU type (its MFU is applied to the target GPU's peak), or in another
    precision or sequence length; `proxy_layers`: the bench ran only that many of the model's layers (its MFU,
    not its tokens/s, carries over to the full model).
    `note` says all of that in words, for the estimate's output.
    """

    bench_id: int
    mfu: float | None  # None only for an exact match on a GPU whose peak the table lacks (tokens/s still apply)
    tokens_per_s: float
    gpu: str
    precision: str
    seq_len: int
    transferred: bool
    proxy_layers: int | None
    note: str


def save_result(session: Session, result: BenchResult, *, run_id: str | None = None) -> Benchmark:
    """Insert the finished bench (the caller commits); config_json keeps every measured field.

    `run_id`: the run that measured it (`gpuplan bench --on ...`); None for a bench on this machine.
    """
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
        config_json=json.dumps(asdict(result)), run_id=run_id,
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
        "source": "run" if row.run_id else "local",
    }


def list_benchmarks(session: Session, limit: int | None = None) -> list[Benchmark]:
    """Newest first."""
    from sqlalchemy import select

    from gpuplan.store.models import Benchmark

    query = select(Benchmark).order_by(Benchmark.created_at.desc(), Benchmark.id.desc())
    if limit:
        query = query.limit(limit)
    return list(session.scalars(query))


# The columns a lookup needs, as one SELECT that both SQLAlchemy and the stdlib sqlite3 reader of
# gpuplan.calibration.throughput (estimate's fast path, no SQLAlchemy import) can run; rows go through
# `candidate_from_row`.
CANDIDATE_SQL = (
    "SELECT id, gpu, precision, seq_len, layers, mfu, tokens_per_s, created_at, config_json FROM benchmarks "
    "WHERE model_signature = ? AND gpu IS NOT NULL AND (mfu > 0 OR tokens_per_s > 0)"
)


@dataclass(frozen=True)
class BenchCandidate:
    """One stored GPU bench of the model in question, as the ranking needs it."""

    id: int
    gpu: str
    precision: str
    seq_len: int
    layers: int | None
    full_layers: int | None
    mfu: float | None
    tokens_per_s: float
    created_at: str  # ISO text: sortable, and what both database paths can give

    @property
    def proxy_layers(self) -> int | None:
        """The layers run when the bench was a shallow proxy of the model, else None."""
        if self.layers is not None and self.full_layers is not None and self.layers < self.full_layers:
            return self.layers
        return None


def candidate_from_row(row: tuple[Any, ...] | Any) -> BenchCandidate:
    """A row of CANDIDATE_SQL -> BenchCandidate."""
    bench_id, gpu, precision, seq_len, layers, mfu, tokens_per_s, created_at, config_json = tuple(row)
    try:
        full_layers = json.loads(config_json).get("full_layers") if config_json else None
    except (ValueError, AttributeError):
        full_layers = None
    return BenchCandidate(int(bench_id), str(gpu), str(precision), int(seq_len),
                          None if layers is None else int(layers), full_layers,
                          float(mfu) if mfu else None, float(tokens_per_s or 0), str(created_at))


def best_bench(candidates: list[BenchCandidate], *, gpu: str, precision: str,
               seq_len: int | None) -> BenchMatch | None:
    """The best stored bench for an estimate on `gpu`, or None.

    Ranking: same GPU type, then same precision, then the closest sequence length, then the full model over a
    shallow proxy, then the newest. A bench on the same GPU, precision and sequence length is a match; anything
    else is `transferred` (its MFU applied to the target GPU's peak) and only usable if it has an MFU.
    """
    usable = [c for c in candidates if c.mfu or (c.gpu == gpu and c.precision == precision
                                                  and (not seq_len or c.seq_len == seq_len))]
    if not usable:
        return None

    def rank(c: BenchCandidate) -> tuple[Any, ...]:
        seq_gap = abs(c.seq_len - seq_len) if seq_len else 0
        return (c.gpu == gpu, c.precision == precision, -seq_gap, c.proxy_layers is None, c.created_at, c.id)

    best = max(usable, key=rank)
    same_seq = not seq_len or best.seq_len == seq_len
    differences = []
    if best.gpu != gpu:
        differences.append(f"measured on {best.gpu}, MFU transferred to {gpu}'s peak")
    if best.precision != precision:
        differences.append(f"measured in {best.precision}")
    if not same_seq:
        differences.append(f"measured at seq-len {best.seq_len}")
    if best.proxy_layers is not None:
        differences.append(f"{best.proxy_layers}-of-{best.full_layers}-layer proxy")
    transferred = not (best.gpu == gpu and best.precision == precision and same_seq)
    note = f"bench #{best.id}" + (f" ({'; '.join(differences)})" if differences else "")
    return BenchMatch(bench_id=best.id, mfu=best.mfu, tokens_per_s=best.tokens_per_s, gpu=best.gpu,
                      precision=best.precision, seq_len=best.seq_len, transferred=transferred,
                      proxy_layers=best.proxy_layers, note=note)


