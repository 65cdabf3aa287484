"""The `launch_plan` event: where a launch may start machines, committed before the provider call so a crash
after it leaves nothing unknown (gpuplan.launching.start tells the crash window)."""

from __future__ import annotations

import datetime as dt
import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuplan.launching.failover import Placement
from gpuplan.providers.base import LaunchRequest, Provider
from gpuplan.runs.events import EventKind
from gpuplan.runs.payloads import LaunchPlanData, PlannedPlacement, TimerData
from gpuplan.store.types import as_utc

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.launching.failsafe_store import PlacedFailSafe
    from gpuplan.store.models import Run


def placements_for_launch(provider: Provider, request: LaunchRequest) -> list[Placement]:
    """Where this launch may start machines: the failover's placements, or the request's own where the provider
    has one place (this machine)."""
    if not provider.tries_placements:
        return [Placement(provider.name, request.region, None, request.instance_type, request.price_per_hour,
                          request.spot)]
    from gpuplan.launching.placements import planned_placements

    return planned_placements(provider, request)


def launch_plan_data(provider: Provider, placements: Sequence[Placement],
                     failsafe: PlacedFailSafe | None = None, generation: int | None = None) -> LaunchPlanData:
    """The `launch_plan` event's data: where to look, what each place costs, and who is launching.

    `failsafe`: the timer the machines will carry (the chosen offer's, and each placement's at its own price).
    The `failsafe` event records it only after the machines started; written here too, before the provider
    call, it still says which cap set the timer when the launching gpuplan dies in between
    (gpuplan.launching.failsafe_store.recorded_failsafe falls back to it). `generation`: a spot relaunch's.
    """
    return LaunchPlanData(
        provider=provider.name,
        cloud=provider.cloud,
        regions=tuple(sorted({p.region for p in placements if p.region})),
        zones=tuple(sorted({p.zone for p in placements if p.zone})),
        instance_types=tuple(sorted({p.instance_type for p in placements if p.instance_type})),
        placements=tuple(_planned(p, failsafe) for p in placements),
        host=socket.gethostname(),
        pid=os.getpid(),
        failsafe=failsafe.chosen.as_payload() if failsafe is not None else None,
        generation=generation,
    )


def _planned(p: Placement, failsafe: PlacedFailSafe | None) -> PlannedPlacement:
    timer = None
    if failsafe is not None:  # a failover placement's machines carry the fail-safe at their own price
        at = failsafe.started(p.price_per_hour)
        timer = TimerData(cap=at.cap, hours=at.hours, detail=at.detail)
    return PlannedPlacement(region=p.region, zone=p.zone, instance_type=p.instance_type,
                            price_per_hour=p.price_per_hour, spot=p.spot, failsafe=timer)


def add_launch_plan(session: Session, run: Run, provider: Provider, placements: Sequence[Placement],
                    failsafe: PlacedFailSafe | None = None, generation: int | None = None) -> None:
    """Add the `launch_plan` event to `session` (the caller commits it before any provider call); a spot
    relaunch gives its generation."""
    from gpuplan.runs.events import record_event

    data = launch_plan_data(provider, placements, failsafe, generation)
    record_event(session, run, EventKind.LAUNCH_PLAN,
                 f"will try {len(placements)} placement(s) on {provider.name} in "
                 f"{', '.join(data.regions) or '(default region)'}", data)


def launch_plans(run: Run) -> list[tuple[dt.datetime, LaunchPlanData]]:
    """(when, plan) of the run's `launch_plan` events, oldest first (a damaged event is skipped)."""
    from gpuplan.runs.events import events_of, payload

    plans = []
    for event in events_of(run, (EventKind.LAUNCH_PLAN,)):
        data = payload(event, LaunchPlanData)
        if data is not None:
            plans.append((as_utc(event.at), data))
    return plans
