"""Scheduled batch training: store schedules, decide what is due, fire each slot exactly once.

Exactly-once per slot does not depend on timing: firing starts by inserting a `schedule_fires` row whose
(schedule_id, fire_at) key is unique, so of two schedulers on one database only one insert succeeds, on
SQLite and PostgreSQL alike. The `scheduler` lease (gpuplan.scheduling.leases) on top keeps a second scheduler idle
rather than racing.

What a fire *does* (re-plan with current prices, budget gate, launch detached) is the `Launcher` passed in:
this module decides when, the launch orchestration decides how.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpuplan.cronspec import due_slot, in_window, next_fire, parse_tz, validate_cron
from gpuplan.errors import NotFoundError, UserError
from gpuplan.runs.events import EventKind, new_event
from gpuplan.runs.payloads import ScheduleData, ScheduleFireData
from gpuplan.store.db import Store
from gpuplan.store.models import Schedule, ScheduleFire

log = logging.getLogger(__name__)


class SkipFire(Exception):
    """Raised by a launcher when a gate says not now (budget, price, window); the reason is recorded."""


@dataclass(frozen=True)
class Gates:
    """The spec's `schedule:` gates that the scheduler itself checks before launching."""

    window: str | None = None
    max_price_per_hour: float | None = None
    spot_only: bool = False


@dataclass(frozen=True)
class FireRequest:
    """What a launcher gets for one due slot."""

    schedule_id: int
    schedule_name: str
    spec_text: str
    fire_at: dt.datetime
    now: dt.datetime
    gates: Gates


@dataclass(frozen=True)
class FireResult:
    schedule: str
    fire_at: dt.datetime
    outcome: str  # launched | skipped | failed
    reason: str | None = None
    run_id: str | None = None


Launcher = Callable[[FireRequest], str]
GatesOf = Callable[[str], Gates]


def spec_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def add_schedule(session: Session, *, name: str, spec_text: str, spec_path: str | None, cron: str, tz: str,
                 now: dt.datetime) -> Schedule:
    """Store a copy of the spec with its cron; later edits to the file do not change the schedule."""
    cron = _checked_cron(cron)
    _checked_tz(tz)
    if session.scalar(select(Schedule).where(Schedule.name == name)) is not None:
        raise UserError(f"a schedule named {name!r} already exists (use 'gpuplan schedule update')")
    schedule = Schedule(name=name, cron=cron, tz=tz, spec_text=spec_text, spec_hash=spec_hash(spec_text),
                        spec_path=spec_path, created_at=now, updated_at=now)
    session.add(schedule)
    session.flush()
    session.add(new_event(EventKind.SCHEDULE_ADDED, f"{name}: {cron} ({tz})",
                          ScheduleData(cron=cron, tz=tz, spec_hash=schedule.spec_hash),
                          schedule_id=schedule.id, at=now))
    return schedule


def update_schedule(session: Session, name: str, *, now: dt.datetime, spec_text: str | None = None,
                    spec_path: str | None = None, cron: str | None = None, tz: str | None = None) -> Schedule:
    """Deliberately replace a schedule's spec copy, cron or time zone (recorded as an event)."""
    schedule = get_schedule(session, name)
    if cron is not None:
        schedule.cron = _checked_cron(cron)
    if tz is not None:
        _checked_tz(tz)
        schedule.tz = tz
    if spec_text is not None:
        schedule.spec_text = spec_text
        schedule.spec_hash = spec_hash(spec_text)
        schedule.spec_path = spec_path
    changes = ScheduleData(cron=schedule.cron if cron is not None else None, tz=tz,
                           spec_hash=schedule.spec_hash if spec_text is not None else None)
    changed = [name for name, value in (("cron", changes.cron), ("tz", changes.tz), ("spec_hash", changes.spec_hash))
               if value is not None]
    if not changed:
        raise UserError("nothing to update: give a spec file, --cron or --tz")
    schedule.updated_at = now
    session.add(new_event(EventKind.SCHEDULE_UPDATED, ", ".join(changed), changes, schedule_id=schedule.id, at=now))
    return schedule


def get_schedule(session: Session, name: str) -> Schedule:
    schedule = session.scalar(select(Schedule).where(Schedule.name == name))
    if schedule is None:
        raise NotFoundError(f"no schedule named {name!r} (see 'gpuplan schedule list')")
    return schedule


def set_paused(session: Session, name: str, paused: bool, now: dt.datetime) -> Schedule:
    schedule = get_schedule(session, name)
    schedule.paused = paused
    schedule.updated_at = now
    kind = EventKind.SCHEDULE_PAUSED if paused else EventKind.SCHEDULE_RESUMED
    session.add(new_event(kind, schedule_id=schedule.id, at=now))
    return schedule


def next_fire_of(schedule: Schedule, now: dt.datetime) -> dt.datetime | None:
    """The next slot that will fire: after now and after the last fired slot (a tick may run ahead of now)."""
    if schedule.paused:
        return None
    after = max(now, schedule.last_fire_at) if schedule.last_fire_at else now
    return next_fire(schedule.cron, schedule.tz, after)


def tick(store: Store, at: dt.datetime, launcher: Launcher, gates_of: GatesOf) -> list[FireResult]:
    """Fire every schedule due at `at`, each slot at most once; a second tick at the same instant fires nothing."""
    with store.session() as session:
        schedules = [(s.id, s.name) for s in session.scalars(select(Schedule).where(Schedule.paused.is_(False)))]
    results = []
    for schedule_id, _name in schedules:
        result = _fire_if_due(store, schedule_id, at, launcher, gates_of)
        if result is not None:
            results.append(result)
    return results


def _fire_if_due(store: Store, schedule_id: int, at: dt.datetime, launcher: Launcher,
                 gates_of: GatesOf) -> FireResult | None:
    with store.session() as session:
        schedule = session.get(Schedule, schedule_id)
        if schedule is None or schedule.paused:
            return None
        slot = due_slot(schedule.cron, schedule.tz, last_fire_at=schedule.last_fire_at,
                        since=schedule.created_at, at=at)
        if slot is None:
            return None
        name, spec_text, tz = schedule.name, schedule.spec_text, schedule.tz
    fire_id = _claim(store, schedule_id, slot, at)
    if fire_id is None:
        return None  # another scheduler fired this slot
    outcome, reason, run_id = "launched", None, None
    try:
        gates = gates_of(spec_text)
        if gates.window and not in_window(gates.window, tz, at):
            raise SkipFire(f"outside the schedule window {gates.window} ({tz})")
        run_id = launcher(FireRequest(schedule_id, name, spec_text, slot, at, gates))
    except SkipFire as exc:
        outcome, reason = "skipped", str(exc)
    except Exception as exc:
        log.exception("schedule %s: fire at %s failed", name, slot)
        outcome, reason = "failed", f"{type(exc).__name__}: {exc}"
    with store.session() as session:
        fire = session.get(ScheduleFire, fire_id)
        assert fire is not None
        fire.outcome, fire.reason, fire.run_id = outcome, reason, run_id
        session.add(new_event(EventKind.schedule_fire(outcome), reason or f"fired slot {slot.isoformat()}",
                              ScheduleFireData(slot), run_id=run_id, schedule_id=schedule_id, at=at))
    return FireResult(name, slot, outcome, reason, run_id)


def _claim(store: Store, schedule_id: int, slot: dt.datetime, at: dt.datetime) -> int | None:
    """Insert the fire row for (schedule, slot); the unique key lets exactly one process succeed."""
    try:
        with store.session() as session:
            fire = ScheduleFire(schedule_id=schedule_id, fire_at=slot, fired_at=at, outcome="claimed")
            session.add(fire)
            schedule = session.get(Schedule, schedule_id)
            assert schedule is not None
            schedule.last_fire_at = slot
            session.flush()
            return fire.id
    except IntegrityError:
        return None


def _checked_cron(cron: str) -> str:
    try:
        return validate_cron(cron)
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def _checked_tz(tz: str) -> None:
    try:
        parse_tz(tz)
    except ValueError as exc:
        raise UserError(str(exc)) from exc


