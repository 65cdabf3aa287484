"""Run queries and state transitions: every change of a run's state is also an Event row.

Shared by launch, follow, status, stop and watch (and later the scheduler and the budget code), so there is one
place that decides what a transition means: a final state is never left, `ended_at` is set when a run ends,
and cost always comes from the instance rows through gpuplan.runs.cost.
"""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuplan.errors import NotFoundError, UserError
from gpuplan.runs.events import EventKind, record_event
from gpuplan.runs.payloads import StateData
from gpuplan.store.models import Run, RunState
from gpuplan.store.types import utcnow

log = logging.getLogger(__name__)


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
    record_event(session, run, EventKind.STATE, f"{previous} -> {state}" + (f": {reason}" if reason else ""),
                 StateData(previous=previous, state=state, reason=reason, exit_code=exit_code))
    return True



MAX_RUN_REF = 200  # the longest run name (runs.name); ids are 12 characters


def get_run(session: Session, ref: str) -> Run:
    """A run by id, unique id prefix, or name (the newest run of that name)."""
    ref = ref.strip()
    if not ref:
        raise UserError("give a run id (see `gpuplan runs`)")
    if len(ref) > MAX_RUN_REF or "\x00" in ref:
        # Longer than any id or name (SQLite refuses a LIKE pattern over 50,000 bytes; PostgreSQL any NUL).
        raise NotFoundError(f"no run {ref[:40]!r}... (a run id or name is at most {MAX_RUN_REF} characters)"
                            if len(ref) > MAX_RUN_REF else f"no run {ref!r} (see `gpuplan runs`)")
    run = session.get(Run, ref)
    if run is not None:
        return run
    # autoescape: `%` and `_` in a ref are characters, not LIKE wildcards ('%e81' must not match r-5bc2d5ae81).
    matches = session.scalars(select(Run).where(Run.id.startswith(ref, autoescape=True)).limit(3)).all()
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


def list_runs(session: Session, limit: int = 50, state: str | None = None, *,
              states: frozenset[str] | None = None, since: dt.datetime | None = None,
              project: str | None = None, provider: str | None = None) -> list[Run]:
    """The newest `limit` runs, optionally only in `state` (or any of `states`), created at or after `since`,
    of `project`, started through `provider`."""
    query = select(Run).order_by(Run.created_at.desc()).limit(limit)
    if state:
        query = query.where(Run.state == state)
    if states:
        query = query.where(Run.state.in_(sorted(states)))
    if since is not None:
        query = query.where(Run.created_at >= since)
    if project is not None:
        query = query.where(Run.project == project)
    if provider is not None:
        query = query.where(Run.provider == provider)
    return list(session.scalars(query))


def elapsed_hours(run: Run, now: dt.datetime | None = None) -> float | None:
    if run.started_at is None:
        return None
    end = run.ended_at or now or utcnow()
    return max((end - run.started_at).total_seconds(), 0.0) / 3600
