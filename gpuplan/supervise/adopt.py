"""Adopt a run's machines the books do not know: list them by the run's tag where its launch plan says they may
be, and record them (Instance rows billed from their real launch time, and an `adopted` event).

Such machines exist when the launching gpuplan died between the provider's answer and the commit of the rows
(gpuplan.launching.start says why that window cannot be closed), or a spot relaunch died the same way
(gpuplan.supervise.relaunch).
`gpuplan stop RUN` adopts before it terminates, the watch step (`status`, `watch`) adopts for a run still
launching whose launcher is gone and for a relaunch whose relauncher is gone, and `gpuplan reconcile`
adopts the unknown machines of recorded runs and searches the regions of recent launch plans.

Whether a launch is still in flight (its machines are about to be recorded by the process that started them) is
read from the last `launch_plan` event: same host and its pid alive (and still a gpuplan) -> in flight, for at most
ORPHAN_AFTER; pid gone -> not; another host -> in flight until ORPHAN_AFTER. Adopting a machine twice is
prevented by the id check of gpuplan.runs.machines.record_instances and, for two processes adopting the same machine
at the same instant, by the unique index on the machine's id in its run (the loser records nothing, and no event).

The price of an adopted machine is looked for in the machine, the launch plan, the run's rows and then the price
catalog (gpuplan.supervise.adopt_price); the `adopted` event records where each price came from.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gpuplan.jobs.processes import command_line, pid_alive, same_process
from gpuplan.launching.launch_plan import launch_plans
from gpuplan.providers.base import Instance, InstanceState, Provider
from gpuplan.runs.events import EventKind, payload
from gpuplan.runs.machines import record_instances
from gpuplan.runs.payloads import AdoptedData, LaunchPlanData
from gpuplan.store.types import as_utc

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.store.models import Run

log = logging.getLogger(__name__)

ORPHAN_AFTER = dt.timedelta(minutes=10)  # a launch whose launcher cannot be checked is given up after this
RECENT = dt.timedelta(days=1)  # reconcile searches the launch-plan regions of runs ended this recently
LAUNCHING = frozenset({"pending", "provisioning"})




def search_regions(run: Run) -> list[str]:
    """Every region the run's machines may be in: its own, its rows', and those of its launch plans."""
    regions = [run.region, *(i.region for i in run.instances)]
    for _, plan in launch_plans(run):
        regions.extend(plan.regions)
    return list(dict.fromkeys(r for r in regions if r))


def _gpuplan_alive(pid: int) -> bool:
    """The pid is a live (not zombie) process that is still a gpuplan (pids are reused)."""
    if not pid_alive(pid):
        return False
    cmdline = command_line(pid)
    return cmdline is None or any(b"gpuplan" in part for part in cmdline)  # no /proc (not Linux): trust the pid


def launcher_alive(run: Run) -> bool | None:
    """Whether the process that wrote the run's last launch plan is alive: None when it cannot be told (another
    host, or no record of it). This very process counts as alive: it may be asking from inside its own launch.

    Before a launch plan exists (the launch died between recording the run and writing the plan), the run's own
    record of its launcher (host, pid, start time: gpuplan.launching.reserve) answers, so such a run is settled
    at once rather than after ORPHAN_AFTER; the start time tells a reused pid from the launcher."""
    plans = launch_plans(run)
    if plans:
        plan = plans[-1][1]
        host, pid = plan.host, plan.pid
        ticks = run.launcher_started if pid == run.launcher_pid else None
    else:
        host, pid, ticks = run.launcher_host, run.launcher_pid, run.launcher_started
    if host != socket.gethostname() or not isinstance(pid, int):
        return None
    return pid == os.getpid() or (same_process(pid, ticks) and _gpuplan_alive(pid))


def plan_in_flight(run: Run, now: dt.datetime) -> bool:
    """True while the process that wrote the run's last launch plan may still record the machines it starts:
    alive (or on another host) and within ORPHAN_AFTER of the plan."""
    if launcher_alive(run) is False:
        return False
    plans = launch_plans(run)
    since = plans[-1][0] if plans else as_utc(run.created_at)
    return as_utc(now) - since < ORPHAN_AFTER


def launch_in_flight(run: Run, now: dt.datetime) -> bool:
    """True while a launching run's machines may still be recorded by the process that is starting them."""
    return run.state in LAUNCHING and plan_in_flight(run, now)


def tagged_machines(provider: Provider, run: Run) -> list[Instance]:
    """The run's machines by tag, in every region it may be in; ended ones too where the provider can say
    (the local provider), so the time they ran is billed."""
    provider.include_regions(search_regions(run))
    return provider.list_tagged(run.id, include_ended=True)


def adopt(session: Session, run: Run, provider: Provider, now: dt.datetime,
          found: Iterable[Instance] | None = None) -> list[Any]:
    """Record every machine tagged with the run that it has no row for; returns the rows added.

    A launching run with adopted machines moves to running (from their launch time); ended machines get their
    rows closed at their end. `found`: the provider's listing, if the caller already has it.
    """
    from gpuplan.runs.events import record_event
    from gpuplan.runs.machines import close_instance
    from gpuplan.runs.records import set_state
    from gpuplan.supervise.adopt_price import AdoptionPricer, PriceQuote

    machines = list(tagged_machines(provider, run) if found is None else found)
    known = {row.provider_instance_id for row in run.instances}
    pricer = AdoptionPricer(run, provider.cloud, session_url(session))
    added: list[tuple[Any, PriceQuote]] = []
    for inst in machines:
        if inst.instance_id in known:
            continue  # recorded already: no price to look for (the catalog is loaded only for new machines)
        quote = pricer.quote(inst)
        if quote.price is not None and quote.price != inst.price_per_hour:
            inst = dataclasses.replace(inst, price_per_hour=quote.price)  # the recorded price wins (adopt_price)
        rows = record_instances(session, run, provider, [inst], default_price=quote.price, now=now)
        for row in rows:
            if inst.state in InstanceState.GONE:
                close_instance(row, inst.state, inst.ended_at or now)
        added.extend((row, quote) for row in rows)
    if not added:
        return []
    unpriced = [row.provider_instance_id for row, quote in added if quote.price is None]
    from_catalog = [row.provider_instance_id for row, quote in added if quote.source == "catalog"]
    record_event(session, run, EventKind.ADOPTED,
                 f"{len(added)} machine(s) carrying the run's tag recorded (the launch that started them did not)"
                 + (f"; priced from the catalog: {', '.join(from_catalog)}" if from_catalog else "")
                 + (f"; no known price for {', '.join(unpriced)}: billed at 0" if unpriced else ""),
                 AdoptedData(instances=tuple(row.provider_instance_id for row, _ in added),
                             launched_at=tuple(row.launched_at for row, _ in added), unpriced=tuple(unpriced),
                             prices={row.provider_instance_id: quote.as_payload() for row, quote in added}))
    if run.state in LAUNCHING:
        set_state(session, run, "running", "adopted after the launching gpuplan died",
                  at=min(row.launched_at for row, _ in added))
    return [row for row, _ in added]


def session_url(session: Session) -> str | None:
    """The database URL the session works on (the catalog reads refreshed prices from the same database)."""
    from sqlalchemy import Engine

    try:
        bind = session.get_bind()
        engine = bind if isinstance(bind, Engine) else bind.engine
        return engine.url.render_as_string(hide_password=False)
    except AttributeError:  # not bound to an engine (never the case in gpuplan; kept from crashing adoption)
        return None


def planned_regions(session: Session, now: dt.datetime) -> dict[str, set[str]]:
    """provider -> regions named by the launch plans of runs still live or ended within RECENT: where
    reconcile must look besides the configured regions, since failover may have put a machine anywhere there."""
    from sqlalchemy import or_, select

    from gpuplan.store.models import Event, Run, RunState

    query = (select(Run.provider, Event).join(Event, Event.run_id == Run.id)
             .where(Event.kind == EventKind.LAUNCH_PLAN,
                    or_(Run.state.in_(RunState.LIVE), Run.ended_at.is_(None), Run.ended_at >= now - RECENT)))
    found: dict[str, set[str]] = {}
    for provider, event in session.execute(query):
        plan = payload(event, LaunchPlanData)
        if plan is not None:
            found.setdefault(provider, set()).update(plan.regions)
    return found
