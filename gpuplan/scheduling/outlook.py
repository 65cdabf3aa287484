"""What the scheduler has ahead of it: how many schedules are active or paused and which fires next.

Printed by `gpuplan scheduler run` when it starts and after every pass, so a scheduler under systemd or cron says
in its log that it is alive and what it waits for, not only when something fires.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuplan.store.db import Store


@dataclass(frozen=True)
class Outlook:
    active: int
    paused: int
    next_name: str | None
    next_at: dt.datetime | None

    def line(self) -> str:
        """`2 schedule(s) active, 1 paused; next: nightly at 2026-11-28 02:00 UTC` (or `none due`)."""
        head = f"{self.active} schedule(s) active" + (f", {self.paused} paused" if self.paused else "")
        if self.next_at is None:
            return f"{head}; nothing to fire" if self.active else f"{head} (add one: gpuplan schedule add)"
        when = self.next_at.astimezone(dt.timezone.utc)
        return f"{head}; next: {self.next_name} at {when:%Y-%m-%d %H:%M} UTC"


def outlook(store: Store, now: dt.datetime) -> Outlook:
    from sqlalchemy import select

    from gpuplan.scheduling.scheduler import next_fire_of
    from gpuplan.store.models import Schedule

    with store.session() as session:
        schedules = list(session.scalars(select(Schedule).order_by(Schedule.name)))
        active = [s for s in schedules if not s.paused]
        upcoming = [(at, s.name) for s in active if (at := next_fire_of(s, now)) is not None]
    first = min(upcoming, default=None, key=lambda pair: pair[0])
    return Outlook(len(active), len(schedules) - len(active), first[1] if first else None,
                   first[0] if first else None)
