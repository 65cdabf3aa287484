"""A run's history: every change is an Event row, appended and read here, with every kind of event named once.

Kinds are an enum (`EventKind`, a StrEnum: the column keeps the snake_case word, so existing rows read as they
are and no migration is needed); the books, status and the crash recovery read them back, so a kind is never
spelled as a bare string anywhere else (migration 0003 renamed the older dotted `reconcile.*`/`schedule.*` kinds).

Payloads: the data an event carries is JSON in one column. Every kind that carries data has a frozen dataclass
(gpuplan.runs.payloads: real types, Decimal money), written through one function (`new_event`, or `record_event`
for a run) and read through one (`payload(event, Kind)`); no other module reads event data by key (a test walks
the syntax tree for it). Why not tables for the launch plan and the fail-safe: both must be committed in the
same transaction as the run's other events *before* the provider call (the crash window,
gpuplan.launching.start), they are written once and never updated, and every reader wants them in the order of
the run's history; a table per kind would add joins and an Alembic revision migrating every existing row for no
query that needs one. The dataclass is the schema: its field names are the stored keys, so rows written before
the payloads were typed read as they are; a damaged or older row reads as None or with its missing fields at
their defaults, never a crash. This module imports no SQLAlchemy at import time: the planner reads relaunch
payloads from a plain sqlite3 query.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import types
import typing
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, TypeVar

from gpuplan.runs.payloads import (
    AdoptedData,
    AttemptData,
    BudgetOverrideData,
    CalibratedData,
    CappedData,
    CreatedData,
    FailSafeData,
    InstancesMergedData,
    LaunchFailedData,
    LaunchPlanData,
    MachinesData,
    OrphanTerminatedData,
    RelaunchData,
    ScheduleData,
    ScheduleFireData,
    SecretDeletedData,
    SpotBilledData,
    StateData,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.store.models import Event, Run


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


# The payload of every kind that carries data (the kinds not named carry none: their message says it all).
PAYLOAD_KINDS: dict[type[Any], frozenset[str]] = {
    CreatedData: frozenset({EventKind.CREATED}),
    StateData: frozenset({EventKind.STATE}),
    LaunchPlanData: frozenset({EventKind.LAUNCH_PLAN}),
    AttemptData: frozenset({EventKind.LAUNCH_ATTEMPT}),
    LaunchFailedData: frozenset({EventKind.LAUNCH_FAILED}),
    MachinesData: frozenset({EventKind.LAUNCHED, EventKind.TERMINATED}),
    FailSafeData: frozenset({EventKind.FAILSAFE}),
    BudgetOverrideData: frozenset({EventKind.BUDGET_OVERRIDE}),
    CappedData: frozenset({EventKind.CAPPED}),
    CalibratedData: frozenset({EventKind.CALIBRATED}),
    SpotBilledData: frozenset({EventKind.SPOT_BILLED}),
    AdoptedData: frozenset({EventKind.ADOPTED}),
    RelaunchData: frozenset({EventKind.RELAUNCH, EventKind.RELAUNCH_FAILED}),
    InstancesMergedData: frozenset({EventKind.INSTANCES_MERGED}),
    OrphanTerminatedData: frozenset({EventKind.RECONCILE_TERMINATED}),
    SecretDeletedData: frozenset({EventKind.RECONCILE_SECRET_DELETED}),
    ScheduleData: frozenset({EventKind.SCHEDULE_ADDED, EventKind.SCHEDULE_UPDATED}),
    ScheduleFireData: frozenset({EventKind.SCHEDULE_LAUNCHED, EventKind.SCHEDULE_SKIPPED, EventKind.SCHEDULE_FAILED}),
}
Payload = TypeVar("Payload")


def new_event(kind: str, message: str = "", data: object | None = None, *, run_id: str | None = None,
              schedule_id: int | None = None, at: dt.datetime | None = None) -> Event:
    """An Event row (not yet added to a session): the one place event data is turned into JSON. `data` must be
    the kind's payload dataclass (None for a kind that carries none) and must hold no secrets."""
    from gpuplan.store.models import Event
    from gpuplan.store.types import utcnow

    if data is not None and kind not in PAYLOAD_KINDS.get(type(data), frozenset()):
        raise TypeError(f"a {kind} event does not carry {type(data).__name__}")
    return Event(run_id=run_id, schedule_id=schedule_id, kind=kind, message=message,
                 data_json=None if data is None else json.dumps(_encode(data)), at=at or utcnow())


def record_event(session: Session, run: Run, kind: str, message: str = "", data: object | None = None) -> Event:
    """Append an event to the run's history (see `new_event` for `data`)."""
    event = new_event(kind, message, data, run_id=run.id)
    session.add(event)
    return event


def events_of(run: Run, kinds: Iterable[str] | None = None) -> list[Event]:
    """The run's events of these kinds (None: all), oldest first (by id within one timestamp: several share one)."""
    wanted = None if kinds is None else set(kinds)
    return sorted((e for e in run.events if wanted is None or e.kind in wanted), key=lambda e: (e.at, e.id or 0))


def payload(event: Event, kind: type[Payload]) -> Payload | None:
    """The event's data as `kind`'s dataclass: None when the event is of another kind or its data is damaged;
    keys the dataclass does not name are left out, missing ones take their defaults, and a value of the wrong
    type reads as the default (an old or hand-edited row never breaks a reader)."""
    return read_payload(event.kind, event.data_json, kind)


def read_payload(event_kind: str, data_json: str | None, kind: type[Payload]) -> Payload | None:
    """`payload` for a row read without the ORM (its kind and data_json columns)."""
    if event_kind not in PAYLOAD_KINDS[kind]:
        return None
    data = _json(data_json)
    if kind is BudgetOverrideData and isinstance(data, list):  # written before the payloads were typed
        data = {"violations": data}
    if not isinstance(data, dict):
        return None
    read = _decode_fields(kind, data)
    return None if read is _BAD else typing.cast(Payload, read)


# For a reader without the ORM (a plain sqlite3 connection): the newest events of one kind, (kind, data_json) rows
# for `read_payload`; parameters (kind, how many).
LATEST_OF_KIND_SQL = "SELECT kind, data_json FROM events WHERE kind = ? ORDER BY at DESC, id DESC LIMIT ?"


def _json(data_json: str | None) -> object:
    try:
        return json.loads(data_json or "{}")
    except ValueError:
        return None


def _encode(value: object) -> object:
    """A payload as JSON: dataclasses as objects, Decimal as its string, datetimes in ISO form, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


_BAD = object()  # a JSON value that does not fit the field's type


def _decode_fields(kind: type[Any], data: dict[str, Any]) -> object:
    """A payload dataclass from a JSON object: each field that is present and fits its type; the rest default."""
    hints = typing.get_type_hints(kind)
    values = {}
    for f in dataclasses.fields(kind):
        value = _decode(data.get(f.name), hints[f.name]) if f.name in data else _BAD
        if value is not _BAD:
            values[f.name] = value
    return kind(**values)


def _decode(value: object, annotation: Any) -> object:
    """`value` (from JSON) as `annotation`, or _BAD. An item of a tuple or dict that does not fit is left out."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (types.UnionType, typing.Union):
        if value is None:
            return None if type(None) in args else _BAD
        for arg in args:
            if arg is not type(None) and (read := _decode(value, arg)) is not _BAD:
                return read
        return _BAD
    if dataclasses.is_dataclass(annotation):
        return _decode_fields(typing.cast(type[Any], annotation), value) if isinstance(value, dict) else _BAD
    if origin is tuple:
        if not isinstance(value, list):
            return _BAD
        return tuple(read for item in value if (read := _decode(item, args[0])) is not _BAD)
    if origin is dict:
        if not isinstance(value, dict):
            return _BAD
        return {k: read for k, item in value.items() if (read := _decode(item, args[1])) is not _BAD}
    return _scalar(value, annotation)


def _scalar(value: object, annotation: Any) -> object:
    """A JSON scalar as bool, int, float, str, Decimal (from its string) or datetime (from ISO), or _BAD."""
    if isinstance(value, bool):
        return value if annotation is bool else _BAD
    if annotation is int:
        return value if isinstance(value, int) else _BAD
    if annotation is float:
        return float(value) if isinstance(value, (int, float)) else _BAD
    if annotation is str:
        return value if isinstance(value, str) else _BAD
    if annotation is Decimal and isinstance(value, (str, int, float)):
        try:
            money = Decimal(str(value))
        except InvalidOperation:
            return _BAD
        return money if money.is_finite() else _BAD
    if annotation is dt.datetime and isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value)
        except ValueError:
            return _BAD
    return _BAD


def history(session: Session, run_id: str) -> list[dict[str, Any]]:
    """A run's events, oldest first, as `status --events` and the dashboard show them: when, what kind, the
    message and its data (the stored JSON as it is: a display, which no reader takes apart)."""
    from gpuplan.store.models import Run

    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(run_id)
    return [{"at": e.at, "kind": e.kind, "message": e.message, "data": _json(e.data_json) if e.data_json else None}
            for e in events_of(run)]
