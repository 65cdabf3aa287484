"""A run's history: every change is an Event row, appended and read here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from gpuplan.store.models import Event, Run
from gpuplan.store.types import utcnow

if TYPE_CHECKING:
    pass


LAUNCH_PLAN = "launch_plan"


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
