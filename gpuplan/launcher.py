"""Start a recorded run's machines and record what came back: the one step of a launch a crash can split.

A launch is: Run row committed -> `launch_plan` event committed (where machines may appear) -> provider call ->
Instance rows committed. The provider call and the commit after it cannot be one transaction, so a process killed
in between leaves machines the rows do not know. What makes that recoverable is written before the call: the run id
(every machine carries it as a tag) and the `launch_plan` event (the provider, every region/zone/instance type the
failover may try and its price there, and the host and pid of the launching process). A later `gpuplan stop`,
`status`/`watch` or `reconcile` reads that event and adopts the machines (gpuplan.adopt).

Recording is idempotent: a machine already recorded for the run (adopted by another process meanwhile) is not
recorded twice, even when two processes record it at the same instant (the unique index on the machine's id in its
run refuses the second row; the loser rolls back just that row and reads the winner's); and if the run was stopped
while its machines were starting, they are terminated at once.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gpuplan.failover import AttemptCallback, Placement
from gpuplan.providers.base import Instance, LaunchRequest, Provider
from gpuplan.testpoint import pause_point

if TYPE_CHECKING:
    from gpuplan.failsafe_inputs import PlacedFailSafe

LAUNCH_PLAN = "launch_plan"


def placements_for_launch(provider: Provider, request: LaunchRequest) -> list[Placement]:
    """Where this launch may start machines: the failover's placements on a cloud, the request's own elsewhere."""
    if provider.cloud == "local":
        return [Placement(provider.name, request.region, None, request.instance_type, request.price_per_hour,
                          request.spot)]
    from gpuplan.cloudlaunch import planned_placements

    return planned_placements(provider, request)


def launch_plan_data(provider: Provider, placements: Sequence[Placement],
                     failsafe: PlacedFailSafe | None = None) -> dict[str, Any]:
    """The `launch_plan` event's data: where to look, what each place costs, and who is launching.

    `failsafe`: the timer the machines will carry (the chosen offer's, and each placement's at its own price).
    The `failsafe` event records it only after the machines started; written here too, before the provider
    call, it still says which cap set the timer when the launching gpuplan dies in between
    (gpuplan.failsafe_inputs.recorded_failsafe falls back to it).
    """
    data = {
        "provider": provider.name,
        "cloud": provider.cloud,
        "regions": sorted({p.region for p in placements if p.region}),
        "zones": sorted({p.zone for p in placements if p.zone}),
        "instance_types": sorted({p.instance_type for p in placements if p.instance_type}),
        "placements": [_placement_data(p, failsafe) for p in placements],
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    if failsafe is not None:
        data["failsafe"] = failsafe.chosen.as_dict()
    return data


def _placement_data(placement: Placement, failsafe: PlacedFailSafe | None) -> dict[str, Any]:
    p = placement
    data: dict[str, Any] = {"region": p.region, "zone": p.zone, "instance_type": p.instance_type,
                            "price_per_hour": str(p.price_per_hour) if p.price_per_hour is not None else None,
                            "spot": p.spot}
    if failsafe is not None:  # a failover placement's machines carry the fail-safe at their own price
        at = failsafe.started(p.price_per_hour)
        data["failsafe"] = {"hours": at.hours, "cap": at.cap, "detail": at.detail}
    return data


def add_launch_plan(session: Any, run: Any, provider: Provider, placements: Sequence[Placement],
                    failsafe: PlacedFailSafe | None = None, **extra: Any) -> None:
    """Add the `launch_plan` event to `session` (the caller commits it before any provider call); `extra` goes
    into its data (a spot relaunch adds its generation)."""
    from gpuplan.runs import record_event

    data = {**launch_plan_data(provider, placements, failsafe), **extra}
    record_event(session, run, LAUNCH_PLAN,
                 f"will try {len(placements)} placement(s) on {provider.name} in "
                 f"{', '.join(data['regions']) or '(default region)'}", **data)


def record_launch_plan(store: Any, run_id: str, provider: Provider, placements: Sequence[Placement],
                       failsafe: PlacedFailSafe | None = None) -> None:
    """Commit the `launch_plan` event (with the planned fail-safe, if any) before any provider call."""
    from gpuplan.store.models import Run

    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None, run_id
        add_launch_plan(session, run, provider, placements, failsafe)


def record_instances(session: Any, run: Any, provider: Provider, instances: Iterable[Instance], *,
                     default_price: Decimal | None, now: Any) -> list[Any]:
    """Add an Instance row per machine the run does not have yet; returns the rows added (each inserted already).

    Price: the provider's, else `default_price` (the placement's), else 0 (unknown: the cost undercounts).
    Billing starts at the provider's launch time, else `now`.

    Each row is inserted under a savepoint: another process may record the same machine between our look at
    `run.instances` and our insert (two adopters at once). The unique index then refuses our row; only that
    insert is undone, the other process's row is read into `run.instances`, and the machine is not in the
    returned list, so the caller records no second event for it. Anything else the caller has pending is
    flushed first and kept.
    """
    from sqlalchemy.exc import IntegrityError

    from gpuplan.store.models import Instance as InstanceRow
    from gpuplan.store.savepoint import savepoint

    known = {row.provider_instance_id for row in run.instances}
    added = []
    for inst in instances:
        if inst.instance_id in known:
            continue
        known.add(inst.instance_id)
        price = inst.price_per_hour if inst.price_per_hour is not None else default_price
        row = InstanceRow(
            provider=provider.name, provider_instance_id=inst.instance_id, cloud=inst.cloud or provider.cloud,
            region=inst.region, zone=inst.zone, instance_type=inst.instance_type, gpu=inst.gpu,
            gpu_count=inst.gpu_count, spot=inst.spot, node_rank=inst.node_rank,
            price_per_hour=price if price is not None else Decimal(0),
            min_billed_seconds=provider.min_billed_seconds, state=inst.state,
            launched_at=inst.launched_at or inst.created_at or now)
        try:
            with savepoint(session):
                run.instances.append(row)
                session.flush()
        except IntegrityError:
            if recorded_row(session, run.id, provider.name, inst.instance_id) is None:
                raise  # refused for another reason than "already recorded"
            session.expire(run, ["instances"])  # reload it with the row the other process committed
            continue
        added.append(row)
    return added


def recorded_row(session: Any, run_id: str, provider_name: str, instance_id: str) -> Any | None:
    """The run's row for the machine, as committed (by this process or another), or None."""
    from sqlalchemy import select

    from gpuplan.store.models import Instance as InstanceRow

    return session.scalars(select(InstanceRow).where(
        InstanceRow.run_id == run_id, InstanceRow.provider == provider_name,
        InstanceRow.provider_instance_id == instance_id)).one_or_none()


def start_and_record(store: Any, run_id: str, provider: Provider, request: LaunchRequest, *,
                     default_price: Decimal | None, on_attempt: AttemptCallback | None = None,
                     placements: Sequence[Placement] | None = None,
                     failsafe: PlacedFailSafe | None = None) -> list[Instance]:
    """Record the launch plan, start the machines, record them, and move the run to running.

    `placements`: the ones the caller already worked out for `request` (the fail-safe is priced on them);
    `failsafe`: the timer `request` gives the machines, written into the launch plan.
    Provider errors propagate (the caller records the failure). A run stopped while this was starting its
    machines gets them terminated here, so a stop during a launch never leaves one running.
    """
    from gpuplan.launch import start_instances
    from gpuplan.runs import record_event, set_state
    from gpuplan.store.models import Run, RunState
    from gpuplan.store.types import utcnow

    if placements is None:
        placements = placements_for_launch(provider, request)
    record_launch_plan(store, run_id, provider, placements, failsafe)
    pause_point("recorded")
    instances = start_instances(provider, request, on_attempt, placements=placements)
    pause_point("launched")
    now = utcnow()
    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None
        record_instances(session, run, provider, instances, default_price=default_price, now=now)
        if instances:  # failover may have moved the run to another zone, region or instance type
            run.zone = instances[0].zone or run.zone
            run.region = instances[0].region or run.region
            run.instance_type = instances[0].instance_type or run.instance_type
        record_event(session, run, "launched", f"{len(instances)} instance(s) started",
                     instances=[i.instance_id for i in instances])
        set_state(session, run, RunState.RUNNING, at=min((i.launched_at for i in instances if i.launched_at),
                                                         default=now))
        if run.state in RunState.FINAL and any(row.terminated_at is None for row in run.instances):
            session.commit()
            from gpuplan.watch import stop_instances

            stop_instances(session, run, provider, utcnow())
    return instances
