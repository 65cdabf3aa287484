"""The machine's own fail-safe: how long the machines being started may run before they stop themselves.

`gpuplan watch` (or a followed launch) enforces every cap, but only while it runs. What holds with nobody
watching is the timer the machines carry (the boot script's power-off, GCE's maxRunDuration, the local
wrapper's timer), and that timer gets one number. For "the budget is a hard cap" to hold with the laptop closed,
that number must be the tightest of all the caps, not just `max_hours`:

- `max_hours`: what is left of it (a spot relaunch gets the remainder, not the whole again);
- `budget_usd`: the run's budget left (minus what it has spent) / the burn rate of the machines being started;
- `deadline`: the time to it;
- every covering budget (gpuplan.books.budgets, the ones the launch gate checks): what it has left / the burn rate,
  unless the launch was forced past the gate (then they are skipped, and the result says so).

Money caps turn into time only at a known, non-zero price: a free machine (the local provider's default) or
an unknown price cannot spend a budget, so those caps then bound nothing. A cloud that bills a minimum
(`min_billed_seconds`) owes it the moment the machines start: money that cannot pay the minimum buys no time.

Pure: the caller gathers the numbers (gpuplan.launching.failsafe_store) and records the answer.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gpuplan.runs.payloads import FailSafeData, TimerData

MAX_HOURS_AT = "max_hours_at"  # LaunchRequest option: price per node -> the fail-safe hours at that price
MAX_HOURS = "max_hours"
BUDGET_USD = "budget_usd"
DEADLINE = "deadline"


def budget_cap_name(budget: str) -> str:
    """The cap name of a covering budget, as events and reasons show it."""
    return f"budget '{budget}'"


@dataclass(frozen=True)
class CoveringBudget:
    """A budget (gpuplan.books.budgets) that covers the run, and what it has left now."""

    name: str
    remaining_usd: Decimal


@dataclass(frozen=True)
class FailSafeInputs:
    """Everything the fail-safe depends on, at the time of a launch or relaunch."""

    now: dt.datetime
    max_hours: float | None = None
    hours_used: float = 0.0  # the run's wall time so far (a relaunch), 0 for a first launch
    budget_usd: Decimal | None = None
    spent_usd: Decimal = Decimal(0)  # the run's own cost so far
    deadline_at: dt.datetime | None = None
    price_per_hour: Decimal | None = None  # per node, of the machines being started
    nodes: int = 1
    min_billed_seconds: int = 0
    budgets: Sequence[CoveringBudget] = ()
    forced: bool = False  # the launch was --force'd past the budget gate: covering budgets do not bound it

    @property
    def burn_usd_per_hour(self) -> Decimal | None:
        """Dollars per hour of all the machines being started; None when unknown."""
        return None if self.price_per_hour is None else Decimal(self.price_per_hour) * max(self.nodes, 1)


@dataclass(frozen=True)
class CapBound:
    """One cap turned into hours from now (None: it does not bound the time), with why."""

    cap: str
    hours: float | None
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"cap": self.cap, "hours": self.hours, "detail": self.detail}


@dataclass(frozen=True)
class FailSafe:
    """The machine-side fail-safe: `hours` from the start (None: no cap bounds it), set by `cap`."""

    hours: float | None
    cap: str | None
    detail: str
    bounds: tuple[CapBound, ...] = ()
    budgets_skipped: bool = False
    burn_usd_per_hour: Decimal | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def refused(self) -> bool:
        """Nothing may start: a cap has no time left."""
        return self.hours is not None and self.hours <= 0

    def summary(self) -> str:
        """`budget_usd: 0.5 h ($50.00 at $100.00/h)`, as launch prints it and the event's message says."""
        if self.hours is None:
            return "none (no cap bounds the time)"
        return f"{self.cap}: {self.hours:.4g} h ({self.detail})"

    def as_dict(self) -> dict[str, Any]:
        """The event's data and the JSON's `failsafe` (strings for money, so nothing rounds through floats)."""
        return {"hours": self.hours, "cap": self.cap, "detail": self.detail,
                "burn_usd_per_hour": None if self.burn_usd_per_hour is None else str(self.burn_usd_per_hour),
                "budgets_skipped": self.budgets_skipped, "notes": list(self.notes),
                "bounds": [b.as_dict() for b in self.bounds]}

    def as_payload(self, generation: int | None = None) -> FailSafeData:
        """The `failsafe` event's data (and a launch plan's planned timer); `generation`: a spot relaunch's."""
        return FailSafeData(hours=self.hours, cap=self.cap, detail=self.detail,
                            burn_usd_per_hour=self.burn_usd_per_hour, budgets_skipped=self.budgets_skipped,
                            notes=self.notes,
                            bounds=tuple(TimerData(b.cap, b.hours, b.detail) for b in self.bounds),
                            generation=generation)


def _money(value: Decimal) -> str:
    """Cents, or tenths of a cent under a dollar (a cloud's minimum billing is often a few cents)."""
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:,.4f}"


def money_hours(left_usd: Decimal, inputs: FailSafeInputs) -> float | None:
    """Hours `left_usd` pays for at the machines' burn rate; None when the price is 0 or unknown.

    Billing is max(actual, minimum): past the minimum, t hours cost burn x t, so the money lasts left / burn
    hours, provided it covers the minimum at all. Money short of the minimum buys 0 hours (the start alone
    would overspend it).
    """
    burn = inputs.burn_usd_per_hour
    if burn is None or burn <= 0:
        return None
    if left_usd <= 0:
        return 0.0
    minimum_usd = burn * Decimal(inputs.min_billed_seconds) / Decimal(3600)
    if left_usd < minimum_usd:
        return 0.0
    return float(left_usd / burn)


def _money_bound(cap: str, left_usd: Decimal, what: str, inputs: FailSafeInputs) -> CapBound:
    hours = money_hours(left_usd, inputs)
    burn = inputs.burn_usd_per_hour
    amount = f"{_money(left_usd)} {what}".rstrip()
    if hours is None or burn is None:
        why = "price unknown" if burn is None else "price 0"
        return CapBound(cap, None, f"{amount}; {why}: money does not bound the time")
    detail = f"{amount} at {_money(burn)}/h"
    if hours == 0 and left_usd > 0 and inputs.min_billed_seconds:
        detail += f", short of the {inputs.min_billed_seconds} s minimum billing"
    return CapBound(cap, hours, detail)


def bounds(inputs: FailSafeInputs) -> list[CapBound]:
    """Every cap of the run as hours from `now` (money caps at the burn rate of the machines being started)."""
    found: list[CapBound] = []
    if inputs.max_hours is not None:
        left = max(inputs.max_hours - inputs.hours_used, 0.0)
        detail = (f"{inputs.max_hours:g} h" if not inputs.hours_used
                  else f"{inputs.max_hours:g} h less {inputs.hours_used:.4g} h already run")
        found.append(CapBound(MAX_HOURS, left, detail))
    if inputs.budget_usd is not None:
        budget = Decimal(inputs.budget_usd)
        what = f"left of {_money(budget)} (spent {_money(inputs.spent_usd)})" if inputs.spent_usd else ""
        found.append(_money_bound(BUDGET_USD, budget - inputs.spent_usd, what, inputs))
    if inputs.deadline_at is not None:
        hours = max((inputs.deadline_at - inputs.now).total_seconds() / 3600, 0.0)
        found.append(CapBound(DEADLINE, hours, f"until {inputs.deadline_at.isoformat()}"))
    if not inputs.forced:
        for budget in inputs.budgets:
            found.append(_money_bound(budget_cap_name(budget.name), budget.remaining_usd, "left", inputs))
    return found


def failsafe(inputs: FailSafeInputs) -> FailSafe:
    """The tightest cap as hours from now, and which cap it is; `hours` None when no cap bounds the time."""
    found = bounds(inputs)
    notes = []
    if inputs.forced and inputs.budgets:
        notes.append("launched with --force past the budget gate: covering budget(s) "
                     + ", ".join(b.name for b in inputs.budgets) + " do not bound the fail-safe")
    limiting = [b for b in found if b.hours is not None]
    skipped = inputs.forced and bool(inputs.budgets)
    if not limiting:
        return FailSafe(None, None, "no cap bounds the time", tuple(found), skipped, inputs.burn_usd_per_hour,
                        tuple(notes))
    tightest = min(limiting, key=lambda b: b.hours if b.hours is not None else float("inf"))
    return FailSafe(tightest.hours, tightest.cap, tightest.detail, tuple(found), skipped,
                    inputs.burn_usd_per_hour, tuple(notes))


def at_price(inputs: FailSafeInputs, price_per_hour: Decimal | None) -> FailSafe:
    """The fail-safe of the same run on machines at another price (a failover placement); None keeps the price."""
    if price_per_hour is None:
        return failsafe(inputs)
    return failsafe(dataclasses.replace(inputs, price_per_hour=Decimal(price_per_hour)))
