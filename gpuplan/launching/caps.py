"""The estimate against the spec's own caps: a job the caps will stop before it ends is said before launching.

A spec's `limits` stop a run (the watch, and the machines' own fail-safe: gpuplan.launching.failsafe): at
`max_hours`, at `budget_usd`, at the `deadline`. When the estimate already goes past one, the job is expected to
be stopped part way (an estimate of 27:46:43 under `max_hours: 1` ends at ~4%), so `gpuplan launch` says by how
much, asks, refuses under -y unless --force, and `--dry-run` shows it. The budgets of the books are the budget
gate's (gpuplan.books.budgets.gate_launch), which already refuses unless --force.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from gpuplan.launching.offer import LaunchPlan


@dataclass(frozen=True)
class Overrun:
    """One cap the estimate goes past: which, by how much, and how far the job would get."""

    cap: str  # max_hours | budget_usd | deadline
    message: str
    done_fraction: float  # of the job, when the cap stops it

    def as_dict(self) -> dict[str, object]:
        return {"cap": self.cap, "message": self.message, "done_fraction": round(self.done_fraction, 4)}


def _hms(hours: float) -> str:
    seconds = round(hours * 3600)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


def overruns(plan: LaunchPlan, now: dt.datetime) -> list[Overrun]:
    """Every spec cap the estimate goes past (none without an estimate). `now`: an aware UTC time."""
    est, limits = plan.estimate, plan.spec.limits
    if est is None or est.hours <= 0:
        return []
    found = []
    if limits.max_hours is not None and est.hours > limits.max_hours:
        share = limits.max_hours / est.hours
        found.append(Overrun("max_hours", f"the estimate {_hms(est.hours)} exceeds max_hours "
                             f"{_hms(limits.max_hours)} by {_hms(est.hours - limits.max_hours)}: the job would be "
                             f"stopped at ~{share:.0%}", share))
    if limits.budget_usd is not None and est.cost_usd is not None and Decimal(est.cost_usd) > limits.budget_usd:
        cost, budget = Decimal(est.cost_usd), Decimal(limits.budget_usd)
        share = float(budget / cost)
        found.append(Overrun("budget_usd", f"the estimated cost ${cost:,.2f} exceeds budget_usd ${budget:,.2f} by "
                             f"${cost - budget:,.2f}: the job would be stopped at ~{share:.0%}", share))
    deadline = limits.deadline_at(now)
    if deadline is not None:
        deadline = deadline.astimezone(dt.timezone.utc) if deadline.tzinfo else deadline.replace(tzinfo=dt.timezone.utc)
        end = now + dt.timedelta(hours=est.hours)
        if end > deadline:
            left = max((deadline - now).total_seconds() / 3600, 0.0)
            share = left / est.hours
            found.append(Overrun("deadline", f"the estimate ends at {end:%Y-%m-%d %H:%M} UTC, "
                                 f"{_hms((end - deadline).total_seconds() / 3600)} after the deadline "
                                 f"{deadline:%Y-%m-%d %H:%M} UTC: the job would be stopped at ~{share:.0%}", share))
    return found
