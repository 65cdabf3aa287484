"""Cost is derived, never typed: price recorded at launch x billed seconds under the cloud's billing rule.

AWS (Linux) and GCP bill per second with a 60 s minimum; local and Slurm use a configured rate with no minimum.
The rule travels with each instance row (`min_billed_seconds`), so a report never has to guess the cloud's rule.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from decimal import Decimal
from typing import Protocol

SECONDS_PER_HOUR = Decimal(3600)
CENT_PRECISION = Decimal("0.000001")


class BilledInstance(Protocol):
    """What costing needs of an instance row (gpuplan.store.models.Instance satisfies it)."""

    price_per_hour: Decimal
    min_billed_seconds: int
    launched_at: dt.datetime
    terminated_at: dt.datetime | None


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
