"""After a spot interruption: relaunch the run from its checkpoint, a bounded number of times, within its budget.

Called by the watch step (gpuplan.supervise.watch.refresh_run) when a live run's machine comes back PREEMPTED. A
relaunch needs a checkpoint dir in the spec (otherwise the work is lost and a relaunch would start over, so the run ends
`failed: preempted`), fewer than MAX_RELAUNCHES earlier relaunches, spend below the budget and time below
max_hours, time left under every cap (gpuplan.launching.failsafe: the new machines' own timer is what is left of the
tightest one, recorded as a `failsafe` event), and the spec's secrets in the watcher's environment. The
machines of the interrupted generation are terminated (a multi-node job cannot go on without a node), their rows
are marked superseded (the settling of the run then looks only at the current generation), and the new machines
go through the same failover as a launch, with a new generation number so EC2's idempotency token differs.
Every decision is an Event.

Crash safety is a launch's (gpuplan.launching.start), with the relaunch's generation in its `launch_plan` event and
its outcome (`relaunch` or `relaunch_failed`) committed with the new rows: a plan without an outcome is a relaunch
still at it (left alone) or dead (its machines are recorded by tag, never relaunched twice; with none, the next
watch step relaunches within the same limits).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import TYPE_CHECKING

from gpuplan.providers.base import InstanceState, Provider, ProviderError
from gpuplan.runs.events import EventKind
from gpuplan.runs.machines import SUPERSEDED, current_instances
from gpuplan.runs.payloads import LaunchPlanData, RelaunchData
from gpuplan.supervise.resume import interruption_notice, relaunch_data, relaunch_resume, resume_words

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.jobs.spec import JobSpec
    from gpuplan.store.models import Run

MAX_RELAUNCHES = 3




def relaunch_count(run: Run) -> int:
    return sum(1 for e in run.events if e.kind == EventKind.RELAUNCH)


def why_not_relaunch(run: Run, spec: JobSpec, now: dt.datetime) -> str | None:
    """The reason a preempted run may not be relaunched, or None when it may."""
    from gpuplan.runs.cost import run_cost
    from gpuplan.runs.records import elapsed_hours

    if spec.checkpoint is None or not spec.checkpoint.dir:
        return "no checkpoint dir in the spec: a relaunch would start over"
    done = relaunch_count(run)
    if done >= MAX_RELAUNCHES:
        return f"already relaunched {done} time(s) (limit {MAX_RELAUNCHES})"
    if run.budget_usd is not None and run_cost(run, now) >= Decimal(run.budget_usd):
        return f"budget: ${run_cost(run, now):.4f} of ${Decimal(run.budget_usd):.2f} spent"
    hours = elapsed_hours(run, now)
    if run.max_hours is not None and hours is not None and hours >= run.max_hours:
        return f"max_hours: ran {hours:.4g} h of {run.max_hours:g} h"
    return None


def relaunch_after_preemption(session: Session, run: Run, provider: Provider, now: dt.datetime) -> bool:
    """Relaunch `run` if allowed; True when new machines are running (the run stays live)."""
    from gpuplan.jobs.spec import parse_spec
    from gpuplan.launching.offer import ChosenOffer, LaunchPlan
    from gpuplan.launching.record import read_secrets
    from gpuplan.launching.start import FailSafeRefused, Generation, build_request, start_machines
    from gpuplan.runs.events import record_event

    spec = parse_spec(run.spec_text, source=f"run {run.id}")
    reason = why_not_relaunch(run, spec, now)
    if reason is None:
        try:
            secrets = read_secrets(spec)
        except Exception as exc:  # a missing secret: the watcher's environment is not the launcher's
            reason = f"cannot relaunch: {exc}"
    if reason is not None:
        record_event(session, run, EventKind.RELAUNCH_SKIPPED, reason)
        return False

    current = current_instances(run)
    still_up = [i for i in current if i.terminated_at is None]
    if still_up:  # the other nodes of an interrupted multi-node job
        provider.terminate([i.provider_instance_id for i in still_up])
        from gpuplan.runs.machines import close_instance

        for row in still_up:
            close_instance(row, InstanceState.TERMINATED, now)
    generation = relaunch_count(run) + 1
    price = next((i.price_per_hour for i in current if i.price_per_hour is not None), None)
    offer = ChosenOffer(provider=run.provider, cloud=run.cloud or provider.cloud, instance_type=run.instance_type,
                        region=run.region, zone=None, gpu=run.gpu, gpus_per_node=int(run.gpus_per_node or 0),
                        nodes=run.nodes, spot=run.spot, price_per_hour=price)
    plan = LaunchPlan(spec=spec, spec_text=run.spec_text, source_dir=None, offer=offer, estimate=None)
    request = build_request(plan, run.id, run.run_dir or "", secrets)
    # The launch's own start path with this generation: the new machines' timer is what is left of the run's caps
    # (not the whole max_hours again), the plan is committed before the provider call (a gpuplan that dies while
    # starting the new machines leaves a plan whose generation has no outcome, and the next watch step adopts what
    # it started: recover_relaunch), every failover attempt is an event, and the run follows its new place and type.
    try:
        instances = start_machines(session, run, provider, request, price=price, now=now,
                                   generation=Generation(generation, superseded=tuple(current)))
    except FailSafeRefused as exc:
        record_event(session, run, EventKind.RELAUNCH_SKIPPED, str(exc).removeprefix("refused: "))
        return False
    except ProviderError as exc:
        record_event(session, run, EventKind.RELAUNCH_FAILED, str(exc), RelaunchData(generation, code=exc.code))
        return False
    resume, notice = relaunch_resume(run, spec, provider), interruption_notice(run)
    checkpoint_dir = spec.checkpoint.dir if spec.checkpoint else None  # why_not_relaunch required one
    record_event(session, run, EventKind.RELAUNCH,
                 f"spot interruption{' (notice seen by the machine)' if notice else ''}: relaunch {generation} of at "
                 f"most {MAX_RELAUNCHES} from checkpoint {checkpoint_dir}{resume_words(resume)}",
                 relaunch_data(generation, tuple(i.instance_id for i in instances), resume, notice))
    session.flush()
    session.expire(run, ["events"])  # the summary of this same watch step reads the relaunch it just recorded
    return True


def pending_relaunch(run: Run) -> int | None:
    """The generation of a relaunch whose launch plan is recorded but whose outcome (`relaunch` or
    `relaunch_failed`) is not: its gpuplan is still starting the machines, or died doing it. None otherwise."""
    from gpuplan.runs.events import events_of, payload

    pending = None
    for event in events_of(run, (EventKind.LAUNCH_PLAN, *EventKind.RELAUNCH_OUTCOMES)):
        plan = payload(event, LaunchPlanData)
        if plan is not None:
            pending = plan.generation
            continue
        outcome = payload(event, RelaunchData)
        if outcome is not None and outcome.generation == pending:
            pending = None
    return pending


def recover_relaunch(session: Session, run: Run, provider: Provider, now: dt.datetime, generation: int) -> bool:
    """Finish relaunch `generation`, whose gpuplan died after committing its launch plan (the caller checked that
    it is no longer in flight): record the machines it started, by tag; if it started none, say so and relaunch
    again within the same limits. True when the run has machines again."""
    from gpuplan.runs.events import record_event
    from gpuplan.supervise.adopt import adopt

    previous = current_instances(run)
    adopted = adopt(session, run, provider, now)
    if not adopted:
        record_event(session, run, EventKind.RELAUNCH_FAILED, "the gpuplan relaunching the run died before any machine "
                     "started", RelaunchData(generation))
        return relaunch_after_preemption(session, run, provider, now)
    for row in previous:
        row.state = SUPERSEDED
    record_event(session, run, EventKind.RELAUNCH,
                 f"spot interruption: relaunch {generation} of at most {MAX_RELAUNCHES}, "
                 "recorded after the gpuplan that started it died",
                 RelaunchData(generation, tuple(row.provider_instance_id for row in adopted), recovered=True))
    return True
