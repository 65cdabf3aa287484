"""Calibration: learn the MFU that runs really achieve, per (GPU type, model-size bucket), from finished runs.

Why: the default MFU model is a prior from published runs; a team's own code, data loader and cluster land
somewhere around it. Each finished run with measured throughput moves the learned value for its GPU type and
size bucket, and `estimate` prefers a learned value over the prior (mfu_source "calibrated").

Storage is append-only: every learning step is a new `calibrations` row holding the running mean after that
run (`mfu`), how many runs it averages (`samples`) and the run it learned from (`run_id`). The latest row of a
(gpu, bucket) is the current value; the rows before it are its history, so `gpuplan calibrate --show` can say
which runs taught it what. A run is learned from at most once.

SQLAlchemy is imported inside the functions (callers open the store only when a database exists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.store.models import Calibration, Run

# Model-size buckets (parameters). MFU varies with size mainly through matmul shapes and parallelism; the
# edges sit at the sizes people actually train (125M-350M, ~1B, ~7B, ~13B, ~70B, and beyond).
BUCKETS: tuple[tuple[str, float], ...] = (
    ("<500M", 5e8),
    ("500M-2B", 2e9),
    ("2B-10B", 1e10),
    ("10B-30B", 3e10),
    ("30B-100B", 1e11),
    (">=100B", float("inf")),
)
DEFAULT_PRECISION = "bf16"
# Runs whose job really ran to an end: succeeded, or stopped/capped while training. A failed or lost run's
# throughput may come from a job that crashed in its first minute, so it teaches nothing.
LEARNABLE_STATES = frozenset({"succeeded", "stopped", "capped"})
MFU_RANGE = (0.005, 1.0)  # outside this a measurement is broken (units mix-up, idle GPUs), not informative


@dataclass(frozen=True)
class RunMfu:
    """What one run says about MFU, and how it was derived (for the history)."""

    mfu: float
    how: str


def params_bucket(params: float) -> str:
    for name, upper in BUCKETS:
        if params < upper:
            return name
    return BUCKETS[-1][0]  # pragma: no cover - the last bucket is unbounded


def run_mfu(run: Run) -> RunMfu | None:
    """The MFU a finished run achieved: its measured MFU, or its measured tokens/s against the GPU's peak.

    `Run.tokens_per_s` is the whole run's throughput (all GPUs, as gpuplan.supervise.progress measures it from the job's
    metrics). FLOPs per token are the estimator's own (gpuplan.estimating.flops, PaLM's 6N + attention, from the
    job spec's workload: model preset, sequence length, precision), so an MFU learned here turns back into the
    same tokens/s when `estimate` applies it.
    """
    if run.state not in LEARNABLE_STATES or not run.gpu:
        return None
    if run.measured_mfu:
        return RunMfu(float(run.measured_mfu), "measured_mfu")
    if not run.tokens_per_s or not run.params:
        return None
    from gpuplan.hardware.peaks import peak_tflops

    workload = _spec_workload(run.spec_text)
    precision = str(workload.get("precision") or DEFAULT_PRECISION)
    peak = peak_tflops(run.gpu, precision)
    if not peak:
        return None
    gpus = max(1.0, float(run.gpus_per_node or 1) * max(1, run.nodes or 1))
    flops_per_token = _flops_per_token(run.params, workload)
    mfu = run.tokens_per_s / gpus * flops_per_token / (peak * 1e12)
    return RunMfu(mfu, f"{run.tokens_per_s:.4g} tokens/s on {gpus:g} x {run.gpu} at {peak:g} TFLOP/s {precision}")


def _flops_per_token(params: int, workload: dict[str, Any]) -> float:
    """Model FLOPs per token as `estimate` counts them, for the spec's architecture when it names a preset."""
    from gpuplan.estimating.architecture import preset
    from gpuplan.estimating.flops import training_flops_per_token
    from gpuplan.estimating.shape import shape_of

    arch = None
    if isinstance(workload.get("model"), str):
        try:
            arch = preset(workload["model"])
        except ValueError:
            arch = None
    seq_len = workload.get("seq_len")
    if not isinstance(seq_len, int) or seq_len <= 0:
        seq_len = min(arch.max_seq_len, 4096) if arch else 2048  # estimate's defaults
    lora = workload.get("lora")
    return training_flops_per_token(shape_of(params, arch), seq_len, recompute=False, lora=bool(lora),
                                    trainable_params=0).model


def record_run(session: Session, run: Run) -> Calibration | None:
    """Learn from `run` if it finished with measured throughput; returns the new calibration row, else None.

    Call it where a run reaches a final state with measured tokens_per_s / measured_mfu. Idempotent: a run
    already learned from is skipped, so calling it again (or `gpuplan calibrate --update`) never double-counts.
    """
    from sqlalchemy import select

    from gpuplan.hardware.peaks import canonical_gpu
    from gpuplan.store.models import Calibration

    measured = run_mfu(run)
    if measured is None or not run.gpu or not run.params or not (MFU_RANGE[0] <= measured.mfu <= MFU_RANGE[1]):
        return None
    if session.scalar(select(Calibration.id).where(Calibration.run_id == run.id).limit(1)) is not None:
        return None
    gpu = canonical_gpu(run.gpu) or run.gpu
    bucket = params_bucket(run.params)
    previous = _latest(session, gpu, bucket)
    samples = (previous.samples if previous else 0) + 1
    mean = measured.mfu if previous is None else previous.mfu + (measured.mfu - previous.mfu) / samples
    row = Calibration(gpu=gpu, params_bucket=bucket, mfu=mean, samples=samples, run_id=run.id)
    session.add(row)
    session.flush()
    return row


def learn_from_finished_runs(session: Session) -> list[Calibration]:
    """Record every finished run with measured throughput that has not been learned from yet (oldest first)."""
    from sqlalchemy import or_, select

    from gpuplan.store.models import Calibration, Run

    learned = select(Calibration.run_id).where(Calibration.run_id.is_not(None))
    runs = session.scalars(
        select(Run).where(Run.state.in_(sorted(LEARNABLE_STATES)), Run.id.not_in(learned),
                          or_(Run.measured_mfu.is_not(None), Run.tokens_per_s.is_not(None)))
        .order_by(Run.ended_at, Run.created_at)
    )
    return [row for run in runs if (row := record_run(session, run)) is not None]


def calibration_table(session: Session) -> list[dict[str, Any]]:
    """What the estimator has learned: one entry per (GPU, bucket) with its value and every step of history."""
    from sqlalchemy import select

    from gpuplan.store.models import Calibration

    groups: dict[tuple[str, str], list[Calibration]] = {}
    for row in session.scalars(select(Calibration).order_by(Calibration.id)):
        groups.setdefault((row.gpu, row.params_bucket), []).append(row)
    bucket_order = {name: i for i, (name, _) in enumerate(BUCKETS)}
    table = []
    for (gpu, bucket), rows in sorted(groups.items(), key=lambda kv: (kv[0][0], bucket_order.get(kv[0][1], 99))):
        latest = rows[-1]
        history, before = [], 0.0
        for r in rows:
            # Each row holds the mean after its run; the run's own MFU is recovered from consecutive means.
            history.append({"id": r.id, "at": r.created_at, "run_id": r.run_id,
                            "run_mfu": r.mfu * r.samples - before * (r.samples - 1), "mfu_after": r.mfu,
                            "samples": r.samples})
            before = r.mfu
        table.append({
            "gpu": gpu, "params_bucket": bucket, "mfu": latest.mfu, "samples": latest.samples,
            "updated_at": latest.created_at, "run_ids": [r.run_id for r in rows if r.run_id],
            "history": history,
        })
    return table


def _latest(session: Session, gpu: str, bucket: str) -> Calibration | None:
    from sqlalchemy import select

    from gpuplan.store.models import Calibration

    return session.scalars(
        select(Calibration).where(Calibration.gpu == gpu, Calibration.params_bucket == bucket)
        .order_by(Calibration.id.desc()).limit(1)
    ).first()


def _spec_workload(spec_text: str | None) -> dict[str, Any]:
    """The `workload` section of the job spec the run was launched with ({} when absent or unreadable)."""
    if not spec_text:
        return {}
    import yaml

    try:
        spec = yaml.safe_load(spec_text)
    except yaml.YAMLError:
        return {}
    workload = spec.get("workload") if isinstance(spec, dict) else None
    return workload if isinstance(workload, dict) else {}
