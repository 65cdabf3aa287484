"""Cost is derived, never typed: price recorded at launch x billed seconds under the cloud's billing rule.

AWS (Linux) and GCP bill per second with a 60 s minimum; local and Slurm use a configured rate with no minimum.
The rule travels with each instance row (`min_billed_seconds`), so a report never has to guess the cloud's rule.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from gpuplan.store.models import Run
from gpuplan.store.types import utcnow

SECONDS_PER_HOUR = Decimal(3600)
CENT_PRECISION = Decimal("0.000001")


class BilledInstance(Protocol):
    """What costing needs of an instance row (gpuplan.store.models.Instance satisfies it, and so do the ledger's
    frozen rows: read-only properties, so a frozen dataclass fits as well as a mapped column)."""

    @property
    def price_per_hour(self) -> Decimal: ...
    @property
    def min_billed_seconds(self) -> int: ...
    @property
    def launched_at(self) -> dt.datetime: ...
    @property
    def terminated_at(self) -> dt.datetime | None: ...


def billed_seconds(instance: BilledInstance, now: dt.datetime) -> Decimal:
    """Seconds billed so far: a running instance accrues up to `now`; an ended one has the cloud's minimum."""
    end = instance.terminated_at or now
    seconds = Decimal(str(max((end - instance.launched_at).total_seconds(), 0.0)))
    if instance.terminated_at is not None or seconds >= instance.min_billed_seconds:
        return max(seconds, Decimal(instance.min_billed_seconds))
    # Still running and under the minimum: the minimum is already owed the moment the machine starts.
    return Decimal(instance.min_billed_seconds)


def instance_cost(instance: BilledInstance, now: dt.datetime) -> Decimal:
    """Dollars owed for one instance up to `now` (exact Decimal, 6 places)."""
    cost = Decimal(instance.price_per_hour) * billed_seconds(instance, now) / SECONDS_PER_HOUR
    return cost.quantize(CENT_PRECISION)


def total_cost(instances: Iterable[BilledInstance], now: dt.datetime) -> Decimal:
    """Sum of instance costs: a run's cost, a project's, a budget's spend."""
    return sum((instance_cost(i, now) for i in instances), Decimal(0))


# --- Splitting an instance's cost at period edges ---------------------------------------------------------
#
# Reports and budgets need "how much of this instance's cost fell in November". The billed time is the actual
# interval [launched_at, end) plus, when the instance ran less than the cloud's minimum, a top-up that belongs
# to the *start* (the minimum is owed the moment the machine starts). Each slice's cost is the difference of
# the quantized cumulative cost at its two edges, so the slices of one instance always add up to exactly
# `instance_cost` (no cent drifts between a monthly report and the per-run total).

MICROS = 1_000_000
MICROS_PER_HOUR = 3600 * MICROS


@dataclass(frozen=True)
class CostSlice:
    """The part of one instance's bill that falls in [start, end) (None = unbounded on that side)."""

    start: dt.datetime | None
    end: dt.datetime | None
    seconds: Decimal
    cost: Decimal


def exact_seconds(delta: dt.timedelta) -> Decimal:
    """A timedelta as exact Decimal seconds (no float round trip)."""
    return Decimal(delta.days * 86400 + delta.seconds) + Decimal(delta.microseconds) / MICROS


def _cumulative_seconds(instance: BilledInstance, t: dt.datetime, now: dt.datetime) -> Decimal:
    """Billed seconds of `instance` that fall before time `t` (the minimum's top-up sits at the launch)."""
    if t <= instance.launched_at:
        return Decimal(0)
    end = max(instance.terminated_at or now, instance.launched_at)
    actual = exact_seconds(end - instance.launched_at)
    top_up = max(Decimal(instance.min_billed_seconds) - actual, Decimal(0))
    return top_up + exact_seconds(min(t, end) - instance.launched_at)


def split_cost(instance: BilledInstance, edges: Sequence[dt.datetime], now: dt.datetime) -> list[CostSlice]:
    """Cut an instance's bill at sorted `edges`: len(edges) + 1 slices, from (-inf, edges[0]) to [edges[-1], inf).

    The slices' costs sum exactly to `instance_cost(instance, now)` and their seconds to `billed_seconds`.
    """
    price = Decimal(instance.price_per_hour)
    bounds: list[dt.datetime | None] = [None, *edges, None]
    cum_seconds = [Decimal(0)] + [_cumulative_seconds(instance, e, now) for e in edges]
    cum_cost = [(price * s / SECONDS_PER_HOUR).quantize(CENT_PRECISION) for s in cum_seconds]
    cum_seconds.append(max(billed_seconds(instance, now), cum_seconds[-1]))
    cum_cost.append(instance_cost(instance, now))
    return [
        CostSlice(bounds[i], bounds[i + 1], cum_seconds[i + 1] - cum_seconds[i], cum_cost[i + 1] - cum_cost[i])
        for i in range(len(bounds) - 1)
    ]


def cost_micros(price_micros_per_hour: int, billed_micros: int) -> int:
    """The same rule in integers (micro-dollars, microseconds): what the report's SQL computes per row.

    price x seconds / 3600, rounded half-to-even to the micro-dollar like `instance_cost`'s quantize. Split
    into whole hours and a remainder so the product stays inside 64-bit integers for any price below
    $2,500/hour (SQLite and PostgreSQL bigint).
    """
    hours, rest = divmod(billed_micros, MICROS_PER_HOUR)
    quotient, remainder = divmod(price_micros_per_hour * rest, MICROS_PER_HOUR)
    if 2 * remainder > MICROS_PER_HOUR or (2 * remainder == MICROS_PER_HOUR and quotient % 2 == 1):
        quotient += 1
    return price_micros_per_hour * hours + quotient


def run_cost(run: Run, now: dt.datetime | None = None) -> Decimal:
    """Dollars so far, from the instance rows (price at launch x billed seconds)."""
    return total_cost(run.instances, now or utcnow())


def price_per_hour(run: Run) -> Decimal:
    """What the run's live machines cost per hour together."""
    return sum((i.price_per_hour for i in run.instances if i.terminated_at is None), Decimal(0))
