"""Run queries and state transitions: every change of a run's state is also an Event row.

Shared by launch, follow, status, stop and watch (and later the scheduler and the budget code), so there is one
place that decides what a transition means: a final state is never left, `ended_at` is set when a run ends,
and cost always comes from the instance rows through gpuplan.costing.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuplan.costing import total_cost
from gpuplan.errors import NotFoundError, UserError
from gpuplan.store.models import Event, Instance, Run, RunState
from gpuplan.store.types import utcnow

log = logging.getLogger(__name__)


def record_event(session: Session, run: Run, kind: str, message: str = "", **data: Any) -> Event:
    """Append an event to the run's history (data must hold no secrets)."""
    event = Event(run_id=run.id, kind=kind, message=message,
                  data_json=json.dumps(data, default=str) if data else None, at=utcnow())
    session.add(event)
    return event


def events_of(run: Run, kinds: Iterable[str]) -> list[Event]:
    """The run's events of these kinds, oldest first (by id within one timestamp: several share one)."""
    wanted = set(kinds)
    return sorted((e for e in run.events if e.kind in wanted), key=lambda e: (e.at, e.id or 0))


def event_data(event: Event) -> dict[str, Any] | None:
    """An event's data; None when it is not a JSON object (a damaged row must not break the reader)."""
    try:
        data = json.loads(event.data_json or "{}")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def set_state(session: Session, run: Run, state: str, reason: str | None = None, *,
              exit_code: int | None = None, at: dt.datetime | None = None) -> bool:
    """Move `run` to `state` and record the event; returns False (and changes nothing) from a final state."""
    if run.state in RunState.FINAL or run.state == state:
        return False
    previous = run.state
    now = at or utcnow()
    run.state = state
    if reason is not None:
        run.state_reason = reason
    if exit_code is not None:
        run.exit_code = exit_code
    if state == RunState.RUNNING and run.started_at is None:
        run.started_at = now
    if state in RunState.FINAL:
        run.ended_at = now
    record_event(session, run, "state", f"{previous} -> {state}" + (f": {reason}" if reason else ""),
                 previous=previous, state=state, reason=reason, exit_code=exit_code)
    if state in RunState.FINAL:
        _learn_throughput(session, run)
    return True


def _learn_throughput(session: Session, run: Run) -> None:
    """Teach the estimator the MFU this run achieved (gpuplan.calibration); never fails the state change."""
    from gpuplan.calibration import record_run

    try:
        learned = record_run(session, run)
    except Exception:  # calibration is a by-product: the books must close even if learning goes wrong
        log.warning("could not learn throughput from run %s", run.id, exc_info=True)
        return
    if learned is not None:
        record_event(session, run, "calibrated", f"MFU for {learned.gpu} {learned.params_bucket} now "
                     f"{learned.mfu:.1%} over {learned.samples} run(s)", calibration_id=learned.id)


def get_run(session: Session, ref: str) -> Run:
    """A run by id, unique id prefix, or name (the newest run of that name)."""
    ref = ref.strip()
    if not ref:
        raise UserError("give a run id (see `gpuplan runs`)")
    run = session.get(Run, ref)
    if run is not None:
        return run
    matches = session.scalars(select(Run).where(Run.id.startswith(ref)).limit(3)).all()
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise UserError(f"run id prefix {ref!r} is ambiguous: {', '.join(m.id for m in matches)}, ...")
    by_name = session.scalars(select(Run).where(Run.name == ref).order_by(Run.created_at.desc()).limit(1)).first()
    if by_name is not None:
        return by_name
    raise NotFoundError(f"no run {ref!r} (see `gpuplan runs`)")


def live_runs(session: Session) -> list[Run]:
    """Runs that may still have machines: what `gpuplan watch` looks after."""
    return list(session.scalars(select(Run).where(Run.state.in_(RunState.LIVE)).order_by(Run.created_at)))


def list_runs(session: Session, limit: int = 50, state: str | None = None) -> list[Run]:
    query = select(Run).order_by(Run.created_at.desc()).limit(limit)
    if state:
        query = query.where(Run.state == state)
    return list(session.scalars(query))


def run_cost(run: Run, now: dt.datetime | None = None) -> Decimal:
    """Dollars so far, from the instance rows (price at launch x billed seconds)."""
    return total_cost(run.instances, now or utcnow())


def price_per_hour(run: Run) -> Decimal:
    """What the run's live machines cost per hour together."""
    return sum((i.price_per_hour for i in run.instances if i.terminated_at is None), Decimal(0))


def elapsed_hours(run: Run, now: dt.datetime | None = None) -> float | None:
    if run.started_at is None:
        return None
    end = run.ended_at or now or utcnow()
    return max((end - run.started_at).total_seconds(), 0.0) / 3600


def close_instance(instance: Instance, state: str, at: dt.datetime | None) -> None:
    """Mark an instance row ended (billing stops at `at`)."""
    instance.state = state
    if instance.terminated_at is None:
        instance.terminated_at = max(at or utcnow(), instance.launched_at)


def estimate_basis(run: Run) -> dict[str, Any]:
    """What the launch-time estimate rested on (from `estimate_json`): its throughput's source and the
    start-up allowance in it (gpuplan.startup). None values for runs recorded without them."""
    from gpuplan.accuracy import estimate_data, estimate_is_a_cap

    data = estimate_data(run.estimate_json)
    return {"estimate_source": data.get("source"), "mfu_source": data.get("mfu_source"),
            "startup_s": data.get("startup_s"), "startup_source": data.get("startup_source"),
            # a `bench --on` job records its cap as its "estimate": shown as a cap, never scored
            "estimate_is_cap": estimate_is_a_cap(data)}


def _failsafe(run: Run) -> dict[str, Any] | None:
    """The machines' own timer as recorded at launch/relaunch: hours, the cap that set it, and why."""
    from gpuplan.failsafe_inputs import recorded_failsafe

    data = recorded_failsafe(run)
    if data is None:
        return None
    return {"hours": data.get("hours"), "cap": data.get("cap"), "detail": data.get("detail"),
            "budgets_skipped": bool(data.get("budgets_skipped"))}


def summary(run: Run, now: dt.datetime | None = None, progress: Any = None) -> dict[str, Any]:
    """The run as the stable JSON of `launch --json` and `status --json`."""
    now = now or utcnow()
    hours = elapsed_hours(run, now)
    cost = run_cost(run, now)
    eta = getattr(progress, "eta_seconds", None) if run.state in RunState.LIVE else None
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
        "progress": round(progress.fraction, 4) if getattr(progress, "fraction", None) is not None else None,
        "eta_seconds": round(eta, 1) if eta is not None else None,
        "budget_usd": run.budget_usd,
        "max_hours": run.max_hours,
        "failsafe": _failsafe(run),
        "run_dir": run.run_dir,
        "instances": [
            {"instance_id": i.provider_instance_id, "node_rank": i.node_rank, "state": i.state,
             "launched_at": i.launched_at, "terminated_at": i.terminated_at, "price_per_hour": i.price_per_hour}
            for i in run.instances
        ],
    }
