"""Gathering the fail-safe's numbers from the store, and recording the answer (gpuplan.launching.failsafe does the
math).

Used by a launch (before anything is recorded, to refuse one with no time left, and again just before the
provider call, for the value the machines get: each failover placement's at its own price) and by a spot
relaunch (what is left of the run's caps). The answer is written into the `launch_plan` event before the
provider call and recorded as a `failsafe` event once the machines started, so when a machine's timer fires,
`watch`/`status` can say which cap set it (`recorded_failsafe`), even across the launch's crash window
(gpuplan.launching.start).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from gpuplan.errors import UserError
from gpuplan.launching.failover import Placement
from gpuplan.launching.failsafe import MAX_HOURS_AT, CoveringBudget, FailSafe, FailSafeInputs, at_price, failsafe
from gpuplan.providers.base import LaunchRequest
from gpuplan.runs.events import EventKind
from gpuplan.runs.payloads import FailSafeData, LaunchPlanData, PlannedPlacement

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.launching.offer import LaunchPlan
    from gpuplan.store.models import Run


def covering_budgets(session: Session, project: str | None, cloud: str | None, now: dt.datetime,
                     exclude_run_id: str | None = None) -> list[CoveringBudget]:
    """The budgets the launch gate checks for this job (gpuplan.books.budgets.applies), with what each has left.

    `exclude_run_id`: the run itself, so its own estimate is not counted as committed against it.
    """
    from gpuplan.books.budgets import applies, list_budgets, status

    return [CoveringBudget(b.name, status(session, b, now, exclude_run_id=exclude_run_id).free_usd)
            for b in list_budgets(session) if applies(b, project, cloud)]


def was_forced(run: Run) -> bool:
    """Was the run launched with --force past the budget gate (a `budget_override` event)?"""
    return any(e.kind == EventKind.BUDGET_OVERRIDE for e in run.events)


def for_plan(session: Session, plan: LaunchPlan, *, min_billed_seconds: int, now: dt.datetime, force: bool) -> FailSafe:
    """The fail-safe of a launch not yet recorded (`gpuplan launch` checks it before recording anything)."""
    spec, offer = plan.spec, plan.offer
    return failsafe(FailSafeInputs(
        now=now, max_hours=spec.limits.max_hours, budget_usd=spec.limits.budget_usd,
        deadline_at=spec.limits.deadline_at(now), price_per_hour=offer.price_per_hour, nodes=offer.nodes,
        min_billed_seconds=min_billed_seconds, forced=force,
        budgets=covering_budgets(session, spec.project, offer.cloud, now)))


def run_inputs(session: Session, run: Run, *, price_per_hour: Decimal | None, nodes: int, min_billed_seconds: int,
               now: dt.datetime) -> FailSafeInputs:
    """The fail-safe's numbers for machines being started for a recorded run: a launch, or a relaunch (then
    what is left: max_hours less the hours run, the budget less what the run has spent)."""
    from gpuplan.runs.cost import run_cost
    from gpuplan.runs.records import elapsed_hours

    spent = run_cost(run, now)
    return FailSafeInputs(
        now=now, max_hours=run.max_hours, hours_used=elapsed_hours(run, now) or 0.0,
        budget_usd=None if run.budget_usd is None else Decimal(run.budget_usd), spent_usd=spent,
        deadline_at=run.deadline_at, price_per_hour=price_per_hour, nodes=nodes,
        min_billed_seconds=min_billed_seconds, forced=was_forced(run),
        budgets=reserved_budgets(session, run, spent, now))


def reserved_budgets(session: Session, run: Run, spent: Decimal, now: dt.datetime) -> list[CoveringBudget]:
    """What each covering budget holds for a recorded run: its reservation less what it has spent
    (gpuplan.launching.reserve), so its machines can never spend more than was reserved, at whatever price the
    placement that has capacity charges. A run recorded before reservations reads the budgets' free money."""
    budgets = covering_budgets(session, run.project, run.cloud, now, exclude_run_id=run.id)
    if run.reserved_usd is None:
        return budgets
    left = max(Decimal(run.reserved_usd) - spent, Decimal(0))
    return [CoveringBudget(b.name, left) for b in budgets]


@dataclass(frozen=True)
class PlacedFailSafe:
    """The fail-safe of a start: at the chosen offer's price, and the placements that leave time to run."""

    inputs: FailSafeInputs
    chosen: FailSafe
    placements: list[Placement]

    @property
    def refused(self) -> bool:
        return self.chosen.refused or not self.placements

    def hours_at(self, price_per_hour: Decimal) -> float | None:
        """The fail-safe hours on a placement at this price (cloudlaunch sets each attempt's timer with it)."""
        return self.started(price_per_hour).hours

    def started(self, price_per_hour: Decimal | None) -> FailSafe:
        """The fail-safe the machines that started carry (at the price of the placement that had capacity)."""
        return at_price(self.inputs, price_per_hour)

    def request(self, request: LaunchRequest) -> LaunchRequest:
        """`request` with the chosen offer's fail-safe and the per-placement one (options[MAX_HOURS_AT])."""
        return dataclasses.replace(request, max_hours=self.chosen.hours,
                                   options={**request.options, MAX_HOURS_AT: self.hours_at})


def placed(inputs: FailSafeInputs, placements: Sequence[Placement]) -> PlacedFailSafe:
    """The fail-safe at the chosen offer's price, keeping only the placements whose price leaves time to run
    (a dearer failover offer may spend what is left of a budget at once: it is not tried)."""
    return PlacedFailSafe(inputs, failsafe(inputs),
                          [p for p in placements if not at_price(inputs, p.price_per_hour).refused])


def refusal(fs: FailSafe) -> str:
    """The one line a launch with no time left is refused with."""
    if not fs.refused:  # the chosen offer leaves time, but none of the placements does
        return f"refused: no placement leaves time to run under the caps ({fs.summary()}); nothing was started"
    return f"refused: no time left under {fs.cap} ({fs.detail}); nothing was started"


def check(fs: FailSafe) -> FailSafe:
    """`fs`, or a UserError (exit 2) when a cap leaves no time to run."""
    if fs.refused:
        raise UserError(refusal(fs))
    return fs


def check_placed(placed_fs: PlacedFailSafe) -> PlacedFailSafe:
    """`placed_fs`, or a UserError (exit 2) when the chosen offer or every placement has no time to run."""
    if placed_fs.refused:
        raise UserError(refusal(placed_fs.chosen))
    return placed_fs


def record_failsafe(session: Session, run: Run, fs: FailSafe, generation: int | None = None) -> None:
    """The `failsafe` event: the hours the machines carry, the cap that set them, and every input."""
    from gpuplan.runs.events import record_event

    message = f"machine fail-safe: {fs.summary()}" + "".join(f"; {n}" for n in fs.notes)
    record_event(session, run, EventKind.FAILSAFE, message, fs.as_payload(generation))


def recorded_failsafe(run: Run) -> FailSafeData | None:
    """The fail-safe the run's current machines carry (the latest launch's or relaunch's), or None.

    The `failsafe` event, recorded once the machines started, is the authority. A launch or relaunch whose
    gpuplan was killed after the cloud call and before that record leaves only its `launch_plan` event, which
    carries the planned fail-safe (gpuplan.launching.start): it stands in when no `failsafe` event is newer, no
    failed start closed that plan, and the run has machines (adopted from the dead launch).
    """
    from gpuplan.runs.events import events_of, payload

    latest: FailSafeData | None = None
    planned: LaunchPlanData | None = None
    for event in events_of(run, (*EventKind.FAILED_STARTS, EventKind.FAILSAFE, EventKind.LAUNCH_PLAN)):
        if event.kind in EventKind.FAILED_STARTS:
            planned = None
            continue
        recorded = payload(event, FailSafeData)
        if recorded is not None:
            latest, planned = recorded, None
        elif event.kind == EventKind.LAUNCH_PLAN:
            plan = payload(event, LaunchPlanData)
            planned = plan if plan is not None and plan.failsafe is not None else None
    if planned is not None and run.instances:
        return _planned_failsafe(run, planned)
    return latest


def _planned_failsafe(run: Run, plan: LaunchPlanData) -> FailSafeData | None:
    """The launch plan's fail-safe; at the price of the placement the run's current machines are in, when the
    plan priced it (failover may have started them on a dearer or cheaper offer than the chosen one)."""
    from gpuplan.runs.machines import SUPERSEDED

    chosen = plan.failsafe
    places = {(i.region, i.zone, i.instance_type) for i in run.instances if i.state != SUPERSEDED}
    for placement in plan.placements:
        at = placement.failsafe
        if chosen is not None and at is not None and any(_is_in(placement, place) for place in places):
            return dataclasses.replace(chosen, hours=at.hours, cap=at.cap, detail=at.detail)
    return chosen


def _is_in(placement: PlannedPlacement, place: tuple[str | None, str | None, str | None]) -> bool:
    """A machine at (region, zone, instance type) was started on this placement (a placement without a zone
    lets the cloud choose it)."""
    region, zone, instance_type = place
    return (placement.region == region and placement.instance_type == instance_type
            and placement.zone in (None, zone))


def fired_reason(run: Run) -> str:
    """Why the run is capped when a machine's own timer stopped it, naming the cap that set the timer:
    `budget_usd: the machine's own fail-safe stopped the job at 0.5 h ($50.00 at $100.00/h)`."""
    data = recorded_failsafe(run)
    if data is None or not data.cap or data.hours is None:
        return "max_hours: the machine's own fail-safe stopped the job"
    return f"{data.cap}: the machine's own fail-safe stopped the job at {data.hours:.4g} h ({data.detail})"
