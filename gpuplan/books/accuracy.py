"""Estimate vs actual: how far the launch-time estimate was from what finished runs really took and cost.

Only runs that *succeeded* count: a failed, stopped or capped run did not do the work the estimate was for, so
its hours say nothing about the estimator. Errors are relative and signed, (actual - estimate) / estimate, so
+0.25 means the run took 25% longer (or cost 25% more) than estimated. `summarise` is what calibration
consumes: the median ratio actual/estimate per GPU is the factor to scale an estimate by.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gpuplan.runs import cost as costing

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class RunAccuracy:
    run_id: str
    name: str
    gpu: str | None
    instance_type: str | None
    cloud: str | None
    est_hours: float | None
    actual_hours: float
    hours_error: float | None
    est_cost_usd: Decimal | None
    actual_cost_usd: Decimal
    cost_error: float | None
    est_tokens_per_s: float | None
    tokens_per_s: float | None


@dataclass(frozen=True)
class ErrorSummary:
    """Absolute-error statistics plus the median actual/estimate ratio (the calibration factor).

    `runs` counts the runs that had an hours estimate (the ones the statistics are over); `without_estimate`
    the succeeded runs listed with none, so "7 runs" never describes statistics drawn from 2.
    """

    runs: int
    without_estimate: int
    median_abs_hours_error: float | None
    mean_abs_hours_error: float | None
    mean_hours_error: float | None
    median_hours_ratio: float | None
    median_abs_cost_error: float | None
    mean_abs_cost_error: float | None


@dataclass(frozen=True)
class Accuracy:
    runs: list[RunAccuracy]
    summary: ErrorSummary
    by_gpu: dict[str, ErrorSummary]


def _rel(actual: float, estimate: float | None) -> float | None:
    if estimate is None or estimate <= 0:
        return None
    return actual / estimate - 1.0


def estimate_data(estimate_json: str | None) -> dict[str, Any]:
    """A run's recorded estimate (`estimate_json`) as a dict; empty when none was recorded or it is damaged."""
    try:
        data = json.loads(estimate_json) if estimate_json else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def estimate_is_a_cap(estimate: Mapping[str, Any]) -> bool:
    """Whether a run's recorded estimate (estimate_data) is only its cap: a `bench --on` job records its
    max-hours (and that much money) so the budget gate and `committed` see what it may cost, but that predicts
    nothing about how long it takes, and scored as an estimate it read as a -98% miss. Such runs carry
    `upper_bound` in their estimate; rows recorded before that flag are known by the bench job's source text."""
    return bool(estimate.get("upper_bound")) or str(estimate.get("source") or "").startswith("bench job:")


def runs_accuracy(session: Session, now: dt.datetime) -> list[RunAccuracy]:
    """Estimate vs actual for every succeeded run with a start and an end, oldest first."""
    from gpuplan.store.models import Run, RunState

    runs = (session.query(Run).filter(Run.state == RunState.SUCCEEDED, Run.started_at.is_not(None),
                                      Run.ended_at.is_not(None)).order_by(Run.ended_at, Run.id))
    out = []
    for run in runs:
        if run.started_at is None or run.ended_at is None:  # the query asked for both; this narrows the types
            continue
        hours = float(costing.exact_seconds(run.ended_at - run.started_at) / costing.SECONDS_PER_HOUR)
        cost = costing.total_cost(run.instances, now)
        capped_only = estimate_is_a_cap(estimate_data(run.estimate_json))  # no estimate to score: shown as none
        est_hours = None if capped_only else run.est_hours
        est_cost = None if run.est_cost_usd is None or capped_only else Decimal(run.est_cost_usd)
        out.append(RunAccuracy(
            run_id=run.id, name=run.name, gpu=run.gpu, instance_type=run.instance_type, cloud=run.cloud,
            est_hours=est_hours, actual_hours=round(hours, 6), hours_error=_rel(hours, est_hours),
            est_cost_usd=est_cost, actual_cost_usd=cost,
            cost_error=_rel(float(cost), None if est_cost is None else float(est_cost)),
            est_tokens_per_s=run.est_tokens_per_s, tokens_per_s=run.tokens_per_s,
        ))
    return out


def summarise(rows: list[RunAccuracy]) -> ErrorSummary:
    hours = [r.hours_error for r in rows if r.hours_error is not None]
    costs = [r.cost_error for r in rows if r.cost_error is not None]

    def med(xs: list[float]) -> float | None:
        return statistics.median(xs) if xs else None

    def mean(xs: list[float]) -> float | None:
        return statistics.fmean(xs) if xs else None

    return ErrorSummary(
        runs=len(hours),
        without_estimate=len(rows) - len(hours),
        median_abs_hours_error=med([abs(x) for x in hours]),
        mean_abs_hours_error=mean([abs(x) for x in hours]),
        mean_hours_error=mean(hours),
        median_hours_ratio=med([1.0 + x for x in hours]),
        median_abs_cost_error=med([abs(x) for x in costs]),
        mean_abs_cost_error=mean([abs(x) for x in costs]),
    )


def accuracy(session: Session, now: dt.datetime) -> Accuracy:
    """Per-run rows, the overall summary and one summary per GPU type (what calibration reads)."""
    rows = runs_accuracy(session, now)
    gpus = sorted({r.gpu or "(none)" for r in rows})
    return Accuracy(rows, summarise(rows), {g: summarise([r for r in rows if (r.gpu or "(none)") == g])
                                            for g in gpus})
