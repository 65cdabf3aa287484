"""The run as the stable JSON of `launch --json` and `status --json`."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from gpuplan.runs.cost import price_per_hour, run_cost
from gpuplan.runs.records import elapsed_hours
from gpuplan.store.models import Run, RunState
from gpuplan.store.types import utcnow
from gpuplan.supervise.progress import Progress
from gpuplan.supervise.resume import resumed_line


def estimate_basis(run: Run) -> dict[str, Any]:
    """What the launch-time estimate rested on (from `estimate_json`): its throughput's source and the
    start-up allowance in it (gpuplan.calibration.startup). None values for runs recorded without them."""
    from gpuplan.books.accuracy import estimate_data, estimate_is_a_cap

    data = estimate_data(run.estimate_json)
    return {"estimate_source": data.get("source"), "mfu_source": data.get("mfu_source"),
            "startup_s": data.get("startup_s"), "startup_source": data.get("startup_source"),
            # a `bench --on` job records its cap as its "estimate": shown as a cap, never scored
            "estimate_is_cap": estimate_is_a_cap(data)}


def _failsafe(run: Run) -> dict[str, Any] | None:
    """The machines' own timer as recorded at launch/relaunch: hours, the cap that set it, and why."""
    from gpuplan.launching.failsafe_store import recorded_failsafe

    data = recorded_failsafe(run)
    if data is None:
        return None
    return {"hours": data.hours, "cap": data.cap, "detail": data.detail, "budgets_skipped": data.budgets_skipped}


def summary(run: Run, now: dt.datetime | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """The run as the stable JSON of `launch --json` and `status --json`."""
    now = now or utcnow()
    hours = elapsed_hours(run, now)
    cost = run_cost(run, now)
    eta = progress.eta_seconds if progress is not None and run.state in RunState.LIVE else None
    projected = None
    if eta is not None:
        projected = cost + price_per_hour(run) * Decimal(str(eta / 3600))
    elif run.state in RunState.FINAL:
        projected = cost
    return {
        "run_id": run.id,
        "name": run.name,
        "project": run.project,
        "provider": run.provider,
        "state": run.state,
        "state_reason": run.state_reason,
        "exit_code": run.exit_code,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "elapsed_hours": round(hours, 6) if hours is not None else None,
        "nodes": run.nodes,
        "gpu": run.gpu,
        "gpus_per_node": run.gpus_per_node,
        "instance_type": run.instance_type,
        "region": run.region,
        "spot": run.spot,
        "price_per_hour": price_per_hour(run) if run.state in RunState.LIVE else None,
        "cost_usd": cost,
        "projected_cost_usd": projected,
        "est_hours": run.est_hours,
        "est_cost_usd": run.est_cost_usd,
        "est_tokens_per_s": run.est_tokens_per_s,
        **estimate_basis(run),
        "tokens_done": run.tokens_done,
        "total_tokens": run.total_tokens,
        "tokens_per_s": run.tokens_per_s,
        "progress": round(progress.fraction, 4) if progress is not None and progress.fraction is not None else None,
        "eta_seconds": round(eta, 1) if eta is not None else None,
        "budget_usd": run.budget_usd,
        "max_hours": run.max_hours,
        "failsafe": _failsafe(run),
        "resumed": resumed_line(run),
        "run_dir": run.run_dir,
        "instances": [
            {"instance_id": i.provider_instance_id, "node_rank": i.node_rank, "state": i.state,
             "launched_at": i.launched_at, "terminated_at": i.terminated_at, "price_per_hour": i.price_per_hour}
            for i in run.instances
        ],
    }
