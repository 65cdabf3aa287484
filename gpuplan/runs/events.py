"""A run's history: every change is an Event row, appended and read here, with every kind of event named once.

Kinds are an enum (`EventKind`, a StrEnum: the column keeps the snake_case word, so existing rows read as they
are and no migration is needed); the books, status and the crash recovery read them back, so a kind is never
spelled as a bare string anywhere else (migration 0003 renamed the older dotted `reconcile.*`/`schedule.*` kinds).

Payloads: the data an event carries is JSON in one column, and the kinds whose data is read back by key have a
dataclass each (`LaunchPlanData`, `RelaunchData`, `SpotBilledData`) read through one function, `payload(event,
Kind)`. Why not tables for the launch plan and the fail-safe: both must be committed in the same transaction as
the run's other events *before* the provider call (the crash window, gpuplan.launching.start), they are written
once and never updated, and every reader wants them in the order of the run's history; a table per kind would
add joins and an Alembic revision migrating every existing row for no query that needs one. The dataclass is
the schema; a damaged or older row reads as None or with its missing fields at their defaults, never a crash.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from gpuplan.store.models import Event, Run
from gpuplan.store.types import utcnow


class EventKind(enum.StrEnum):
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
    FAILED_STARTS = enum.nonmember((LAUNCH_FAILED, RELAUNCH_FAILED))
    # the events that close a relaunch's launch plan
    RELAUNCH_OUTCOMES = enum.nonmember((RELAUNCH, RELAUNCH_FAILED))

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


@dataclass(frozen=True)
class LaunchPlanData:
    """A `launch_plan` event: where machines may appear (gpuplan.launching.launch_plan), before the provider call."""

    provider: str | None = None
    cloud: str | None = None
    regions: list[str] = field(default_factory=list)
    zones: list[str] = field(default_factory=list)
    instance_types: list[str] = field(default_factory=list)
    placements: list[dict[str, Any]] = field(default_factory=list)
    host: str | None = None
    pid: int | None = None
    failsafe: dict[str, Any] | None = None  # the planned timer (gpuplan.launching.failsafe_store)
    generation: int | None = None  # a spot relaunch's; None for the launch


@dataclass(frozen=True)
class RelaunchData:
    """A `relaunch` or `relaunch_failed` event (gpuplan.supervise.relaunch)."""

    generation: int | None = None
    instances: list[str] = field(default_factory=list)
    resumed_from_step: int | None = None
    checkpoint_at: str | None = None
    lost_steps: int | None = None
    lost_seconds: float | None = None
    recovered: bool = False


@dataclass(frozen=True)
class SpotBilledData:
    """A `spot_billed` event: one spot machine re-priced from the cloud's history (gpuplan.supervise.spot_bill)."""

    instance: str | None = None
    source: str | None = None


Payload = TypeVar("Payload", LaunchPlanData, RelaunchData, SpotBilledData)
PAYLOAD_KINDS: dict[type[Any], frozenset[str]] = {
    LaunchPlanData: frozenset({EventKind.LAUNCH_PLAN}),
    RelaunchData: frozenset({EventKind.RELAUNCH, EventKind.RELAUNCH_FAILED}),
    SpotBilledData: frozenset({EventKind.SPOT_BILLED}),
}


def payload(event: Event, kind: type[Payload]) -> Payload | None:
    """The event's data as `kind`'s dataclass: None when the event is of another kind or its data is damaged;
    keys the dataclass does not name are left out, missing ones take their defaults, and a value of the wrong
    type reads as the default (an old or hand-edited row never breaks a reader)."""
    if event.kind not in PAYLOAD_KINDS[kind]:
        return None
    data = event_data(event)
    if data is None:
        return None
    values: dict[str, Any] = {}
    for f in dataclasses.fields(kind):
        value = data.get(f.name)
        if value is not None and _fits(value, f.type):
            values[f.name] = value
    return kind(**values)


def _fits(value: object, annotation: object) -> bool:
    """Does a JSON value fit a field's (string) annotation: int, float, str, bool, list or dict, maybe None."""
    text = str(annotation)
    if isinstance(value, bool):
        return text.startswith("bool")
    if isinstance(value, int):
        return text.startswith(("int", "float"))
    checks = (("float", float), ("str", str), ("list", list), ("dict", dict))
    return any(text.startswith(name) and isinstance(value, kind) for name, kind in checks)


def history(session: Session, run_id: str) -> list[dict[str, Any]]:
    """A run's events, oldest first, as `status --events` and the dashboard show them: when, what kind, the
    message and its data."""
    from gpuplan.store.models import Run

    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(run_id)
    return [{"at": e.at, "kind": e.kind, "message": e.message, "data": event_data(e)} for e in events_of(run)]
