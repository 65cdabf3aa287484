"""A run's history: every change is an Event row, appended and read here, with every kind of event named once.

Kinds are snake_case words; the books, status and the crash recovery read them back, so a kind is never spelled
as a bare string anywhere else (migration 0003 renamed the older dotted `reconcile.*`/`schedule.*` kinds).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy.orm import Session

from gpuplan.store.models import Event, Run
from gpuplan.store.types import utcnow


class EventKind:
    """Every kind of Event row gpuplan writes (a schedule's events share the table, with `schedule_id`)."""

    # a run's life
    CREATED = "created"  # the Run row was recorded, before any provider call
    STATE = "state"  # a state transition (gpuplan.runs.records.set_state)
    LAUNCHING = "launching"  # the provider is being asked for machines
    LAUNCH_PLAN = "launch_plan"  # where machines may appear, committed before the provider call
    LAUNCH_ATTEMPT = "launch_attempt"  # one failover placement tried
    LAUNCH_FAILED = "launch_failed"  # no machine started
    LAUNCHED = "launched"  # machines started and recorded
    FAILSAFE = "failsafe"  # the machines' own timer and the cap that set it
    BUDGET_OVERRIDE = "budget_override"  # a launch --force'd past its budgets
    CPU_FALLBACK = "cpu_fallback"  # --allow-cpu: a spec that asks for GPUs runs on the CPU
    CAP = "cap"  # max_hours, budget or deadline reached: the run is stopped
    CAPPED = "capped"  # a covering budget ran out: the budget code capped the run
    STOP = "stop"  # stopped on purpose
    TERMINATED = "terminated"  # the run's machines were terminated
    CALIBRATED = "calibrated"  # the estimator learned this run's MFU (gpuplan.supervise.settle)
    SPOT_BILLED = "spot_billed"  # a spot machine re-priced from the spot price history (gpuplan.supervise.spot_bill)
    # a run's machines found after a crash, and spot relaunches
    ADOPTED = "adopted"
    ADOPT_FAILED = "adopt_failed"
    RELAUNCH = "relaunch"
    RELAUNCH_FAILED = "relaunch_failed"
    RELAUNCH_SKIPPED = "relaunch_skipped"
    INSTANCES_MERGED = "instances_merged"  # migration 0002 folded duplicate instance rows
    # reconcile
    RECONCILE_TERMINATED = "reconcile_terminated"
    RECONCILE_SECRET_DELETED = "reconcile_secret_deleted"
    # schedules
    SCHEDULE_ADDED = "schedule_added"
    SCHEDULE_UPDATED = "schedule_updated"
    SCHEDULE_PAUSED = "schedule_paused"
    SCHEDULE_RESUMED = "schedule_resumed"
    SCHEDULE_LAUNCHED = "schedule_launched"
    SCHEDULE_SKIPPED = "schedule_skipped"
    SCHEDULE_FAILED = "schedule_failed"

    # the events that close a launch plan whose machines never started
    FAILED_STARTS = (LAUNCH_FAILED, RELAUNCH_FAILED)
    # the events that close a relaunch's launch plan
    RELAUNCH_OUTCOMES = (RELAUNCH, RELAUNCH_FAILED)

    @staticmethod
    def schedule_fire(outcome: str) -> str:
        """The kind of a schedule fire's event: its outcome, `launched`, `skipped` or `failed`."""
        kinds = {"launched": EventKind.SCHEDULE_LAUNCHED, "skipped": EventKind.SCHEDULE_SKIPPED,
                 "failed": EventKind.SCHEDULE_FAILED}
        return kinds[outcome]


def record_event(session: Session, run: Run, kind: str, message: str = "", **data: Any) -> Event:
    """Append an event to the run's history (data must hold no secrets)."""
    event = Event(run_id=run.id, kind=kind, message=message,
                  data_json=json.dumps(data, default=str) if data else None, at=utcnow())
    session.add(event)
    return event


def events_of(run: Run, kinds: Iterable[str] | None = None) -> list[Event]:
    """The run's events of these kinds (None: all), oldest first (by id within one timestamp: several share one)."""
    wanted = None if kinds is None else set(kinds)
    return sorted((e for e in run.events if wanted is None or e.kind in wanted), key=lambda e: (e.at, e.id or 0))


def event_data(event: Event) -> dict[str, Any] | None:
    """An event's data; None when it is not a JSON object (a damaged row must not break the reader)."""
    try:
        data = json.loads(event.data_json or "{}")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def history(session: Session, run_id: str) -> list[dict[str, Any]]:
    """A run's events, oldest first, as `status --events` and the dashboard show them: when, what kind, the
    message and its data."""
    from gpuplan.store.models import Run

    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(run_id)
    return [{"at": e.at, "kind": e.kind, "message": e.message, "data": event_data(e)} for e in events_of(run)]
