"""Adopt a run's machines the books do not know: list them by the run's tag where its launch plan says they may
be, and record them (Instance rows billed from their real launch time, and an `adopted` event).

Such machines exist when the launching gpuplan died between the provider's answer and the commit of the rows
(gpuplan.launcher says why that window cannot be closed), or a spot relaunch died the same way (gpuplan.spot).
`gpuplan stop RUN` adopts before it terminates, the watch step (`status`, `watch`) adopts for a run still
launching whose launcher is gone and for a relaunch whose relauncher is gone, and `gpuplan reconcile`
adopts the unknown machines of recorded runs and searches the regions of recent launch plans.

Whether a launch is still in flight (its machines are about to be recorded by the process that started them) is
read from the last `launch_plan` event: same host and its pid alive (and still a gpuplan) -> in flight, for at most
ORPHAN_AFTER; pid gone -> not; another host -> in flight until ORPHAN_AFTER. Adopting a machine twice is
prevented by the id check of gpuplan.launcher.record_instances (within one transaction: two processes adopting
the same machine at the same instant could still both record it; there is no unique index on the instance id).
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
import logging
import os
import socket
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from gpuplan.failover import hint_regions
from gpuplan.jobs.processes import command_line, pid_alive
from gpuplan.launcher import LAUNCH_PLAN, record_instances
from gpuplan.providers.base import Instance, InstanceState, Provider

log = logging.getLogger(__name__)

ORPHAN_AFTER = dt.timedelta(minutes=10)  # a launch whose launcher cannot be checked is given up after this
RECENT = dt.timedelta(days=1)  # reconcile searches the launch-plan regions of runs ended this recently
LAUNCHING = frozenset({"pending", "provisioning"})


def _aware(at: dt.datetime) -> dt.datetime:
    return at if at.tzinfo else at.replace(tzinfo=dt.timezone.utc)


def launch_plans(run: Any) -> list[tuple[dt.datetime, dict[str, Any]]]:
    """(when, data) of the run's `launch_plan` events, oldest first."""
    plans = []
    for event in sorted((e for e in run.events if e.kind == LAUNCH_PLAN), key=lambda e: (e.at, e.id or 0)):
        try:
            data = json.loads(event.data_json or "{}")
        except ValueError:
            continue
        if isinstance(data, dict):
            plans.append((_aware(event.at), data))
    return plans


def search_regions(run: Any) -> list[str]:
    """Every region the run's machines may be in: its own, its rows', and those of its launch plans."""
    regions = [run.region, *(i.region for i in run.instances)]
    for _, data in launch_plans(run):
        regions.extend(data.get("regions") or ())
    return list(dict.fromkeys(r for r in regions if r))


def _gpuplan_alive(pid: int) -> bool:
    """The pid is a live (not zombie) process that is still a gpuplan (pids are reused)."""
    if not pid_alive(pid):
        return False
    cmdline = command_line(pid)
    return cmdline is None or any(b"gpuplan" in part for part in cmdline)  # no /proc (not Linux): trust the pid


def launcher_alive(run: Any) -> bool | None:
    """Whether the process that wrote the run's last launch plan is alive: None when it cannot be told (another
    host, or no launch plan). This very process counts as alive: it may be asking from inside its own launch."""
    plans = launch_plans(run)
    if not plans:
        return None
    data = plans[-1][1]
    pid = data.get("pid")
    if data.get("host") != socket.gethostname() or not isinstance(pid, int):
        return None
    return pid == os.getpid() or _gpuplan_alive(pid)


def plan_in_flight(run: Any, now: dt.datetime) -> bool:
    """True while the process that wrote the run's last launch plan may still record the machines it starts:
    alive (or on another host) and within ORPHAN_AFTER of the plan."""
    if launcher_alive(run) is False:
        return False
    plans = launch_plans(run)
    since = plans[-1][0] if plans else _aware(run.created_at)
    return _aware(now) - since < ORPHAN_AFTER


def launch_in_flight(run: Any, now: dt.datetime) -> bool:
    """True while a launching run's machines may still be recorded by the process that is starting them."""
    return run.state in LAUNCHING and plan_in_flight(run, now)


def planned_price(run: Any, inst: Instance) -> Decimal | None:
    """The price the launch plan quoted for the machine's region and type (the run's offer price as a last
    resort, for its own region and type); None when nothing matches (the adopted row then bills at 0)."""
    for _, data in reversed(launch_plans(run)):
        for p in data.get("placements") or ():
            if p.get("price_per_hour") is None:
                continue
            if p.get("instance_type") in (None, inst.instance_type) and p.get("region") in (None, inst.region):
                return Decimal(str(p["price_per_hour"]))
    for row in run.instances:
        if row.instance_type == inst.instance_type and row.region == inst.region:
            return Decimal(row.price_per_hour)
    return None


def tagged_machines(provider: Provider, run: Any) -> list[Instance]:
    """The run's machines by tag, in every region it may be in; ended ones too where the provider can say
    (the local provider), so the time they ran is billed."""
    hint_regions(provider, search_regions(run))
    try:
        with_ended = "include_ended" in inspect.signature(provider.list_tagged).parameters
    except (TypeError, ValueError):
        with_ended = False
    if with_ended:
        return provider.list_tagged(run.id, include_ended=True)  # type: ignore[call-arg]
    return provider.list_tagged(run.id)


def adopt(session: Any, run: Any, provider: Provider, now: dt.datetime,
          found: Iterable[Instance] | None = None) -> list[Any]:
    """Record every machine tagged with the run that it has no row for; returns the rows added.

    A launching run with adopted machines moves to running (from their launch time); ended machines get their
    rows closed at their end. `found`: the provider's listing, if the caller already has it.
    """
    from gpuplan.runs import close_instance, record_event, set_state

    machines = list(tagged_machines(provider, run) if found is None else found)
    added = []
    for inst in machines:
        price = inst.price_per_hour if inst.price_per_hour is not None else planned_price(run, inst)
        rows = record_instances(session, run, provider, [inst], default_price=price, now=now)
        for row in rows:
            if inst.state in InstanceState.GONE:
                close_instance(row, inst.state, inst.ended_at or now)
        added.extend((row, price is None) for row in rows)
    if not added:
        return []
    unpriced = [row.provider_instance_id for row, no_price in added if no_price]
    record_event(session, run, "adopted",
                 f"{len(added)} machine(s) carrying the run's tag recorded (the launch that started them did not)"
                 + (f"; no known price for {', '.join(unpriced)}: billed at 0" if unpriced else ""),
                 instances=[row.provider_instance_id for row, _ in added],
                 launched_at=[row.launched_at.isoformat() for row, _ in added], unpriced=unpriced)
    if run.state in LAUNCHING:
        set_state(session, run, "running", "adopted after the launching gpuplan died",
                  at=min(row.launched_at for row, _ in added))
    return [row for row, _ in added]


def planned_regions(session: Any, now: dt.datetime) -> dict[str, set[str]]:
    """provider -> regions named by the launch plans of runs still live or ended within RECENT: where
    reconcile must look besides the configured regions, since failover may have put a machine anywhere there."""
    from sqlalchemy import or_, select

    from gpuplan.store.models import Event, Run, RunState

    query = (select(Run.provider, Event.data_json).join(Event, Event.run_id == Run.id)
             .where(Event.kind == LAUNCH_PLAN,
                    or_(Run.state.in_(RunState.LIVE), Run.ended_at.is_(None), Run.ended_at >= now - RECENT)))
    found: dict[str, set[str]] = {}
    for provider, data_json in session.execute(query):
        try:
            regions = json.loads(data_json or "{}").get("regions") or ()
        except (ValueError, AttributeError):
            continue
        found.setdefault(provider, set()).update(r for r in regions if isinstance(r, str))
    return found
