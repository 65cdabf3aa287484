"""Budgets as hard caps: the launch gate, the status report and the watch loop's cap.

A budget is an amount per period (calendar month or ISO week in UTC, or `total` for a lifetime cap),
optionally limited to one project and/or some clouds. Its *spent* is the ledger's spend of matching instance
rows in the current period (running instances accrue to now); *reserved* is what the matching live runs may
still spend: each run's reservation (the most it can spend, its machine fail-safe x price x nodes, taken when it
was recorded: gpuplan.launching.reserve) less what it has cost so far; a run recorded before reservations counts
its launch estimate instead. *free* is amount - spent - reserved. A launch whose estimate exceeds what is free is
refused (exit 2) unless forced, and a forced launch leaves an event behind. Because every launch takes its
reservation under a lock in the transaction that records it, and its machines' fail-safe is exactly that
reservation, concurrent launches cannot together spend more than a budget holds. When spent reaches the
amount, the watch loop stops the matching live runs (state `capped`, reason recorded).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gpuplan.books import ledger, periods
from gpuplan.errors import NotFoundError, UserError
from gpuplan.runs import cost as costing
from gpuplan.runs.events import EventKind, new_event
from gpuplan.runs.payloads import BudgetOverrideData, CappedData, ViolationData

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.store.models import Run

ZERO = Decimal(0)


@dataclass(frozen=True)
class BudgetStatus:
    """Where one budget stands at `now`. Money is exact Decimal; rates are dollars per hour."""

    name: str
    period: str
    amount_usd: Decimal
    project: str | None
    clouds: list[str] | None
    period_start: dt.datetime | None
    period_end: dt.datetime | None
    spent_usd: Decimal
    reserved_usd: Decimal
    free_usd: Decimal
    burn_usd_per_hour: Decimal
    running_usd_per_hour: Decimal
    forecast_usd: Decimal | None
    live_runs: int
    exhausted: bool


@dataclass(frozen=True)
class Violation:
    """A launch that does not fit in a budget."""

    budget: str
    period: str
    amount_usd: Decimal
    spent_usd: Decimal
    reserved_usd: Decimal
    free_usd: Decimal
    est_cost_usd: Decimal | None

    @property
    def message(self) -> str:
        est = "an unknown cost" if self.est_cost_usd is None else f"${self.est_cost_usd:,.2f}"
        period = "in total" if self.period == "total" else f"this {self.period}"
        return (f"budget '{self.budget}' (${self.amount_usd:,.2f} {period}) has ${max(self.free_usd, ZERO):,.2f} "
                f"left (spent ${self.spent_usd:,.2f}, reserved ${self.reserved_usd:,.2f}); this job is estimated "
                f"at {est}")


@dataclass(frozen=True)
class CapAction:
    """A run the watch loop stopped because a budget was exhausted."""

    run_id: str
    budget: str
    reason: str


def parse_clouds(clouds: str | None) -> list[str] | None:
    return [c for c in clouds.split(",") if c] if clouds else None


def set_budget(session: Session, name: str, amount_usd: Decimal, period: str, project: str | None = None,
               clouds: list[str] | None = None) -> Any:
    """Create or replace the budget called `name`."""
    from gpuplan.store.models import Budget
    from gpuplan.store.types import MONEY_LIMIT

    if not name.strip():
        raise UserError("a budget needs a name")
    if not amount_usd.is_finite() or amount_usd <= 0:
        raise UserError(f"--amount must be a positive number of dollars, got {amount_usd}")
    if amount_usd >= MONEY_LIMIT:
        raise UserError(f"--amount must be less than ${MONEY_LIMIT:,}, got {amount_usd}")
    if amount_usd.quantize(costing.CENT_PRECISION) <= 0:  # 1e-400 would be stored as $0: a cap of nothing
        raise UserError(f"--amount must be at least ${costing.CENT_PRECISION} (the books keep 6 decimal places), "
                        f"got {amount_usd}")
    if period not in periods.BUDGET_PERIODS:
        raise UserError(f"--period must be one of {', '.join(periods.BUDGET_PERIODS)}, got {period!r}")
    if project is not None and not project.strip():
        # An empty project matches no run (runs without a project have None), so the cap would never bite.
        raise UserError("--project must not be empty (leave it out to cap every project)")
    _check_clouds(clouds or [])
    budget = session.query(Budget).filter_by(name=name).one_or_none() or Budget(name=name)
    budget.amount_usd = amount_usd.quantize(costing.CENT_PRECISION)
    budget.period = period
    budget.project = project
    budget.clouds = ",".join(sorted({c.strip().lower() for c in clouds or [] if c.strip()})) or None
    session.add(budget)
    session.flush()
    return budget


def _check_clouds(clouds: list[str]) -> None:
    """A misspelt cloud ('awz') would make a cap that matches no spend and so never stops anything."""
    from gpuplan.providers.registry import provider_names

    known = provider_names()
    for cloud in (c.strip().lower() for c in clouds):
        if cloud and cloud not in known:
            raise UserError(f"--cloud: unknown cloud {cloud!r}; known: {', '.join(known)}")


def list_budgets(session: Session) -> list[Any]:
    from gpuplan.store.models import Budget

    return list(session.query(Budget).order_by(Budget.name))


def get_budget(session: Session, name: str) -> Any:
    from gpuplan.store.models import Budget

    budget = session.query(Budget).filter_by(name=name).one_or_none()
    if budget is None:
        raise NotFoundError(f"no budget named {name!r} (see 'gpuplan budget list')")
    return budget


def remove_budget(session: Session, name: str) -> None:
    session.delete(get_budget(session, name))


def applies(budget: Any, project: str | None, cloud: str | None) -> bool:
    """Does `budget` cover a job of this project on this cloud?"""
    if budget.project is not None and budget.project != project:
        return False
    clouds = parse_clouds(budget.clouds)
    return clouds is None or (cloud or "").lower() in clouds


def _live_runs(session: Session, budget: Any) -> list[Any]:
    from gpuplan.store.models import Run, RunState

    runs = session.query(Run).filter(Run.state.in_(sorted(RunState.LIVE))).all()
    return [r for r in runs if applies(budget, r.project, r.cloud)]


def reserved(run: Run, now: dt.datetime) -> Decimal:
    """What a live run may still spend: its reservation minus what it has cost so far (never < 0).

    A run without a reservation (recorded before reservations existed, or no cap bounds it) counts its launch
    estimate the same way, as budgets did before."""
    held = run.reserved_usd if run.reserved_usd is not None else run.est_cost_usd
    if held is None:
        return ZERO
    return max(Decimal(held) - costing.total_cost(run.instances, now), ZERO)


def status(session: Session, budget: Any, now: dt.datetime, exclude_run_id: str | None = None) -> BudgetStatus:
    """Spent, reserved, free, burn rate and forecast of one budget at `now`.

    burn = spent / hours elapsed in the period (for `total`, since the first matching instance started);
    forecast = spent + burn x hours left in the period (None for `total`, which has no end).
    """
    from sqlalchemy import func

    from gpuplan.store.models import InstanceRow, Run

    start, end = periods.budget_window(budget.period, now)
    scope = ledger.Scope(budget.project, tuple(parse_clouds(budget.clouds) or ()) or None)
    spent = ledger.spend(session, now=now, since=start, until=end, scope=scope).total_cost
    live = [r for r in _live_runs(session, budget) if r.id != exclude_run_id]
    held = sum((reserved(r, now) for r in live), ZERO)
    running_rate = sum((Decimal(i.price_per_hour) for r in live for i in r.instances if i.terminated_at is None),
                       ZERO)
    if start is None:
        first = session.query(func.min(InstanceRow.launched_at)).join(Run, Run.id == InstanceRow.run_id)
        if budget.project is not None:
            first = first.filter(Run.project == budget.project)
        if scope.clouds:
            first = first.filter(InstanceRow.cloud.in_(scope.clouds))
        start_for_burn = first.scalar() or now
    else:
        start_for_burn = start
    elapsed_h = costing.exact_seconds(now - start_for_burn) / costing.SECONDS_PER_HOUR
    burn = (spent / elapsed_h).quantize(costing.CENT_PRECISION) if elapsed_h > 0 else ZERO
    forecast = None
    if end is not None:
        left_h = max(costing.exact_seconds(end - now) / costing.SECONDS_PER_HOUR, ZERO)
        forecast = (spent + burn * left_h).quantize(costing.CENT_PRECISION)
    amount = Decimal(budget.amount_usd)
    return BudgetStatus(
        name=budget.name, period=budget.period, amount_usd=amount, project=budget.project,
        clouds=parse_clouds(budget.clouds), period_start=start, period_end=end, spent_usd=spent,
        reserved_usd=held, free_usd=amount - spent - held, burn_usd_per_hour=burn,
        running_usd_per_hour=running_rate, forecast_usd=forecast, live_runs=len(live), exhausted=spent >= amount,
    )


@dataclass(frozen=True)
class BudgetRun:
    """One run behind a budget's figures: what it spent in the budget's window and what it still holds."""

    run_id: str
    spent_usd: Decimal
    reserved_usd: Decimal
    live: bool


def runs_behind(session: Session, budget: Any, now: dt.datetime) -> list[BudgetRun]:
    """The runs a budget's spent and reserved are made of, biggest first: the same ledger query and reservations
    as `status`, grouped by run (so their spent adds up to the status's spent, and their reserved to its
    reserved)."""
    start, end = periods.budget_window(budget.period, now)
    scope = ledger.Scope(budget.project, tuple(parse_clouds(budget.clouds) or ()) or None)
    by_run = ledger.spend(session, now=now, since=start, until=end, key="run", scope=scope)
    spent = {ledger.key_values("run", row.key)[0]: row.cost for row in by_run.rows}
    held = {r.id: reserved(r, now) for r in _live_runs(session, budget)}
    ids = sorted(set(spent) | set(held), key=lambda i: (-(spent.get(i, ZERO) + held.get(i, ZERO)), i))
    return [BudgetRun(i, spent.get(i, ZERO), held.get(i, ZERO), i in held) for i in ids]


def check_launch(session: Session, project: str | None, cloud: str | None, est_cost_usd: Decimal | None,
                 now: dt.datetime, exclude_run_id: str | None = None) -> list[Violation]:
    """Every budget the job would break. A job without an estimate breaks only an already-used-up budget.

    `exclude_run_id`: the job's own run row when launch has already recorded it (so it is not counted as
    reserved against itself).
    """
    violations = []
    for budget in list_budgets(session):
        if not applies(budget, project, cloud):
            continue
        st = status(session, budget, now, exclude_run_id=exclude_run_id)
        over = st.free_usd <= 0 if est_cost_usd is None else Decimal(est_cost_usd) > st.free_usd
        if over:
            violations.append(Violation(budget.name, budget.period, st.amount_usd, st.spent_usd, st.reserved_usd,
                                        st.free_usd, None if est_cost_usd is None else Decimal(est_cost_usd)))
    return violations


class BudgetRefused(UserError):
    """A launch whose estimate breaks a budget, refused before anything is recorded (exit 2)."""

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        more = f" (and {len(violations) - 1} more budget(s))" if len(violations) > 1 else ""
        super().__init__(f"refused: {violations[0].message}{more}; use --force to launch anyway")


def gate_launch(session: Session, *, project: str | None, cloud: str | None, est_cost_usd: Decimal | None,
                now: dt.datetime, force: bool = False, run_id: str | None = None,
                dry_run: bool = False) -> list[Violation]:
    """What `launch` calls before it starts anything: refuse (UserError, exit 2) or, with force, let it through.

    Returns the violations that were overridden (empty when the job fits). With a `run_id` (the run is already
    recorded) an override is recorded as a `budget_override` event at once; otherwise the caller records it
    with `record_override` once the run exists. A dry run checks the same way and records nothing.
    """
    violations = check_launch(session, project, cloud, est_cost_usd, now, exclude_run_id=run_id)
    if not violations:
        return []
    if not force:
        raise BudgetRefused(violations)
    if run_id is not None and not dry_run:
        record_override(session, violations, run_id, now)
    return violations


def record_override(session: Session, violations: list[Violation], run_id: str | None, now: dt.datetime) -> None:
    """The `budget_override` event of a launch forced past its budgets (which budgets, by how much)."""

    session.add(new_event(EventKind.BUDGET_OVERRIDE,
                          "launched over budget with --force: " + "; ".join(v.message for v in violations),
                          BudgetOverrideData(tuple(_violation_data(v) for v in violations)), run_id=run_id, at=now))
    session.flush()


def _violation_data(v: Violation) -> ViolationData:
    return ViolationData(budget=v.budget, period=v.period, amount_usd=v.amount_usd, spent_usd=v.spent_usd,
                         reserved_usd=v.reserved_usd, free_usd=v.free_usd, est_cost_usd=v.est_cost_usd)


def enforce(session: Session, now: dt.datetime,
            stop_run: Callable[[Any, str], None] | None = None) -> list[CapAction]:
    """What the watch loop calls each pass: cap every live run covered by an exhausted budget.

    Each such run is moved to `capped` with the reason (a state event) and gets a `capped` event naming the
    budget; then `stop_run(run, reason)`, when given, terminates its machines. `gpuplan watch` passes none:
    it commits the state first and its per-run pass stops the machines of every capped run (the same order as
    its own max-hours cap, so a concurrent pass can never mistake the cap for a user stop).
    """
    from gpuplan.runs.events import record_event
    from gpuplan.runs.records import set_state
    from gpuplan.store.models import RunState

    actions: list[CapAction] = []
    for budget in list_budgets(session):
        st = status(session, budget, now)
        if not st.exhausted:
            continue
        for run in _live_runs(session, budget):
            reason = (f"budget '{budget.name}' exhausted: spent ${st.spent_usd:,.2f} of ${st.amount_usd:,.2f}"
                      + ("" if budget.period == "total" else f" this {budget.period}"))
            set_state(session, run, RunState.CAPPED, reason, at=now)
            record_event(session, run, EventKind.CAPPED, reason,
                         CappedData(budget=budget.name, spent_usd=st.spent_usd, amount_usd=st.amount_usd))
            if stop_run is not None:
                stop_run(run, reason)
            actions.append(CapAction(run.id, budget.name, reason))
        session.flush()
    return actions
