"""One watch step for a run: ask the provider, read the metrics, settle the state, enforce the caps.

`watch_run` is the unit that `gpuplan launch` (while following), `gpuplan watch` (for detached runs), `status`,
the scheduler and the budget code all call, so a run is judged the same way whoever looks at it. It is safe to
call from several processes: a final state is never left, and stopping an ended machine is not an error.

Caps (the run is stopped and ends `capped`, with the reason recorded): `limits.max_hours` of wall time since the
run started, `limits.budget_usd` of accrued cost (derived from the instance rows), and `limits.deadline`. The
machines also stop themselves at the tightest of these (and of the covering budgets): their fail-safe
(gpuplan.launching.failsafe), recorded at launch; when it fires, the run ends `capped` naming the cap that set it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import or_, select

from gpuplan.launching.failsafe_store import fired_reason
from gpuplan.providers.base import Instance as ProviderInstance
from gpuplan.providers.base import InstanceState, Provider, ProviderError
from gpuplan.runs.cost import run_cost
from gpuplan.runs.events import EventKind, record_event
from gpuplan.runs.machines import close_instance, current_instances, fetch_outputs, stop_instances
from gpuplan.runs.records import elapsed_hours, set_state
from gpuplan.store.models import InstanceRow, Run, RunState
from gpuplan.store.types import utcnow
from gpuplan.supervise.progress import METRICS_FILE, Progress, measure
from gpuplan.supervise.relaunch import pending_relaunch, recover_relaunch, relaunch_after_preemption
from gpuplan.supervise.settle import settle
from gpuplan.supervise.summary import summary

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.store.db import Store

log = logging.getLogger(__name__)


ProviderFactory = Callable[[str], Provider]


@dataclass
class WatchResult:
    """What one watch step saw and did."""

    run_id: str
    state: str
    changed: bool
    capped: str | None
    progress: Progress | None
    summary: dict[str, Any]


def _default_factory(name: str) -> Provider:
    """The provider as orchestration configures it (not via gpuplan.launching.start: status must not import
    pydantic)."""
    from gpuplan.providers.registry import make_provider

    return make_provider(name)


def metrics_path(run: Run) -> Path | None:
    return Path(run.run_dir) / METRICS_FILE if run.run_dir else None


def cap_reason(run: Run, now: dt.datetime) -> str | None:
    """Why the run must be stopped now, or None. Pure: reads the row and its instances."""
    if run.state not in RunState.LIVE:
        return None
    hours = elapsed_hours(run, now)
    if run.max_hours is not None and hours is not None and hours >= run.max_hours:
        return f"max_hours: ran {hours:.4g} h, limit {run.max_hours:g} h"
    if run.budget_usd is not None:
        cost = run_cost(run, now)
        if cost >= run.budget_usd:
            return f"budget: spent ${cost:.4f} of ${Decimal(run.budget_usd):.2f}"
    if run.deadline_at is not None and now >= run.deadline_at:
        return f"deadline: {run.deadline_at.isoformat()} has passed"
    return None


def _final_state(described: list[ProviderInstance], hint: str | None = None,
                 failsafe_reason: str | None = None) -> tuple[str, str | None, int | None]:
    """How a run ended, from its machines once all are gone: (state, reason, exit code).

    `hint` (the provider's outcome_hint) is added to the reason of a run that ends `lost`, so the user learns
    how to make the next one report its exit code. `failsafe_reason`: what to say when a machine's own timer
    stopped the job, naming the cap that set the timer (gpuplan.launching.failsafe_store.fired_reason); the machine
    only knows its timer fired ("max_hours"), not which cap it stood for."""
    codes = [(i.node_rank, i.exit_code) for i in described]
    reasons = {i.state_reason for i in described if i.state_reason}
    if "max_hours" in reasons:
        return (RunState.CAPPED, failsafe_reason or "max_hours: the machine's own fail-safe stopped the job",
                _first_bad(codes))
    if any(i.state == InstanceState.PREEMPTED for i in described):
        return RunState.FAILED, "preempted (spot capacity reclaimed)", _first_bad(codes)
    if "stopped" in reasons:
        return RunState.STOPPED, "stopped outside gpuplan", _first_bad(codes)
    if any(code is None for _, code in codes):
        unknown = next(i for i in described if i.exit_code is None)
        reason = unknown.state_reason or "the machines ended without reporting an exit code"
        return RunState.LOST, f"{reason}; {hint}" if hint else reason, None
    bad = [i for i in described if i.exit_code != 0]
    if bad:
        # the cause in the runtime's words when the machine knows it (gpuplan.jobs.failure_cause), not only the code
        first = bad[0]
        where = f"exit code {first.exit_code} on node {first.node_rank}"
        return RunState.FAILED, f"{first.failure_cause} ({where})" if first.failure_cause else where, first.exit_code
    return RunState.SUCCEEDED, None, 0


def _first_bad(codes: list[tuple[int, int | None]]) -> int | None:
    return next((code for _, code in codes if code not in (0, None)), None)


def adopt_orphans(session: Session, run: Run, provider: Provider, now: dt.datetime) -> bool:
    """A run still launching whose launch is no longer in flight (the launching gpuplan died, or ORPHAN_AFTER has
    passed): record the machines that carry its tag (gpuplan.supervise.adopt), or, with none, mark it failed."""
    from gpuplan.supervise.adopt import adopt, launch_in_flight

    if run.state not in (RunState.PENDING, RunState.PROVISIONING) or launch_in_flight(run, now):
        return False
    if adopt(session, run, provider, now):
        return True
    if run.instances:
        return False
    return set_state(session, run, RunState.FAILED, "the launch never completed and no machine carries its tag")


def _start_billing_when_started(run: Run, row: InstanceRow, inst: ProviderInstance) -> None:
    """A row recorded while its machine was still queued (a Slurm job waiting for nodes) is billed from the moment
    the provider says it really started, and the run's clock (max_hours) starts then too; queue time is free."""
    if row.state != InstanceState.PENDING or inst.state == InstanceState.PENDING or inst.launched_at is None:
        return
    if inst.launched_at <= row.launched_at:
        return
    row.launched_at = inst.launched_at
    others_started = any(i is not row and i.state != InstanceState.PENDING for i in run.instances)
    if run.started_at is not None and not others_started and run.started_at < inst.launched_at:
        run.started_at = inst.launched_at


def refresh_run(session: Session, run: Run, provider: Provider, now: dt.datetime) -> tuple[bool, Progress | None]:
    """Update instance rows from the provider and the run's measured progress; settle a run whose machines ended.

    Returns (state changed, progress).
    """
    provider.include_regions([run.region, *(i.region for i in run.instances)])
    adopted = adopt_orphans(session, run, provider, now)
    generation = pending_relaunch(run) if run.state in RunState.LIVE else None
    if generation is not None:
        from gpuplan.supervise.adopt import plan_in_flight

        if plan_in_flight(run, now):  # another gpuplan is starting the relaunch: its machines are its to record
            return False, None
        adopted = recover_relaunch(session, run, provider, now, generation) or adopted
    open_rows = [i for i in run.instances if i.terminated_at is None]
    described: dict[str, ProviderInstance] = {}
    if open_rows:
        try:
            for inst in provider.describe([i.provider_instance_id for i in open_rows]):
                described[inst.instance_id] = inst
        except ProviderError as exc:
            log.warning("cannot describe the machines of %s: %s", run.id, exc)
            return False, None
    fetch_outputs(provider, run, list(described.values()))
    for row in open_rows:
        seen = described.get(row.provider_instance_id)
        if seen is None:
            continue
        _start_billing_when_started(run, row, seen)
        row.state = seen.state
        if seen.state in InstanceState.GONE:
            close_instance(row, seen.state, seen.ended_at or now)

    progress = measure(metrics_path(run), run.total_tokens)
    if progress is not None:
        run.tokens_done = progress.tokens
        if progress.tokens_per_s is not None:
            run.tokens_per_s = progress.tokens_per_s

    changed = adopted
    preempted = [r for r in open_rows if r.provider_instance_id in described
                 and described[r.provider_instance_id].state == InstanceState.PREEMPTED]
    if preempted and run.state in RunState.LIVE:
        # A spot interruption: relaunch from the checkpoint when allowed; otherwise end the other nodes too.
        if relaunch_after_preemption(session, run, provider, now):
            return True, progress
        if any(i.terminated_at is None for i in current_instances(run)):
            stop_instances(session, run, provider, now)
    current = current_instances(run)
    if run.state in RunState.LIVE and current and all(i.terminated_at is not None for i in current):
        latest = [described.get(i.provider_instance_id) for i in current]
        fired = fired_reason(run)
        if all(latest):
            state, reason, code = _final_state([i for i in latest if i is not None], provider.outcome_hint(), fired)
        else:  # ended in an earlier step whose settling did not finish: look again
            again = provider.describe([i.provider_instance_id for i in current])
            fetch_outputs(provider, run, again)
            state, reason, code = _final_state(again, provider.outcome_hint(), fired)
        ended = max(i.terminated_at for i in current if i.terminated_at is not None)
        changed = set_state(session, run, state, reason, exit_code=code, at=ended)
    return changed, progress


def watch_run(store: Store, run_id: str, *, provider_factory: ProviderFactory | None = None,
              now: dt.datetime | None = None) -> WatchResult:
    """One pass over one run: refresh, enforce caps (stop + `capped`), and report."""
    factory = provider_factory or _default_factory
    now = now or utcnow()
    capped = None
    with store.session() as session:
        run = session.get(Run, run_id)
        if run is None:
            raise LookupError(run_id)
        provider = factory(run.provider)
        changed, progress = refresh_run(session, run, provider, now)
        reason = cap_reason(run, now)
        if reason is not None:
            # Final state first (committed), then stop: a concurrent step that sees the machines end then
            # cannot mistake the cap for a user stop.
            set_state(session, run, RunState.CAPPED, reason)
            record_event(session, run, EventKind.CAP, reason)
            session.commit()
            capped = reason
            changed = True
        # A stopped or capped run whose machines are still up (this step's cap, or a stop that did not finish).
        stopped = run.state in RunState.FINAL and any(i.terminated_at is None for i in run.instances)
        if stopped:
            stop_instances(session, run, provider, utcnow())
        # This step ended the run, or ended its last machines (a budget cap recorded elsewhere): settle it (a run
        # looked at again is not re-read; its spot machines are billed now that their span is known).
        if changed or stopped:
            settle(session, run, provider)
        result_state = run.state
        data = summary(run, utcnow(), progress)
    return WatchResult(run_id=run_id, state=result_state, changed=changed, capped=capped, progress=progress,
                       summary=data)


def stop_run(store: Store, run_id: str, *, reason: str = "stopped by the user", state: str = RunState.STOPPED,
             provider_factory: ProviderFactory | None = None) -> WatchResult:
    """Stop a run on purpose (`gpuplan stop`, or the budget code with state=capped)."""
    factory = provider_factory or _default_factory
    with store.session() as session:
        run = session.get(Run, run_id)
        if run is None:
            raise LookupError(run_id)
        ending = run.state in RunState.LIVE
        if ending:
            set_state(session, run, state, reason)
            record_event(session, run, EventKind.STOP, reason)
            session.commit()
        provider = factory(run.provider)
        _adopt_before_stop(session, run, provider)
        stop_instances(session, run, provider, utcnow())
        progress = measure(metrics_path(run), run.total_tokens)
        if ending:
            settle(session, run, provider)
        data = summary(run, utcnow(), progress)
        result_state = run.state
    return WatchResult(run_id=run_id, state=result_state, changed=True, capped=None, progress=progress, summary=data)


def _adopt_before_stop(session: Session, run: Run, provider: Provider) -> None:
    """Record (and commit) the machines a crashed launch of the run started but never recorded, so the stop
    terminates them too and bills them from their launch; a listing error leaves the recorded machines to stop."""
    from gpuplan.supervise.adopt import adopt

    try:
        adopt(session, run, provider, utcnow())
    except ProviderError as exc:
        log.warning("cannot list the machines of %s to adopt: %s", run.id, exc)
        record_event(session, run, EventKind.ADOPT_FAILED, f"could not look for unrecorded machines: {exc}")
    session.commit()


def runs_to_watch(store: Store) -> list[str]:
    """Live runs, and ended runs that still have an open instance row (a stop that did not finish)."""
    with store.session() as session:
        open_instance = select(InstanceRow.run_id).where(InstanceRow.terminated_at.is_(None))
        query = select(Run.id).where(or_(Run.state.in_(RunState.LIVE), Run.id.in_(open_instance)))
        return list(session.scalars(query.order_by(Run.created_at)))


def watch_all(store: Store, *, provider_factory: ProviderFactory | None = None) -> list[WatchResult]:
    """One pass of `gpuplan watch` over every run that needs looking after; one run's error never stops the rest.

    Budgets first: live runs covered by an exhausted budget become `capped` (committed), and the per-run pass
    below then stops their machines.
    """
    enforce_budgets(store)
    results = []
    for run_id in runs_to_watch(store):
        try:
            results.append(watch_run(store, run_id, provider_factory=provider_factory))
        except ProviderError as exc:
            log.warning("watch %s: %s", run_id, exc)
    return results


def enforce_budgets(store: Store, now: dt.datetime | None = None) -> list[Any]:
    """Cap (state `capped`, committed) every live run covered by an exhausted budget; `watch_run` then stops
    the machines of a capped run. Returns the budgets' CapActions."""
    from gpuplan.books.budgets import enforce

    with store.session() as session:
        actions = enforce(session, now or utcnow())
        for action in actions:
            capped = session.get(Run, action.run_id)
            if capped is not None:
                settle(session, capped)
    for action in actions:
        log.info("run %s capped: %s", action.run_id, action.reason)
    return actions
