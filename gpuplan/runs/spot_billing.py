"""What a spot machine cost as billed: the integral of its zone's spot price over the time it ran.

The spot price changes while a machine runs, and the cloud bills each second at the price in effect then
(AWS: "You pay the Spot price that's in effect, billed to the nearest second",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-instances.html; a price history row is the price from
its Timestamp until the next row). So the billed cost of [start, end) is the sum over the history's steps of
price x the step's seconds inside the span, the first step being the price in effect at `start` (the last change
at or before it; the history APIs return it). A machine that ran less than the cloud's minimum is billed the
minimum at the price in effect at its start, as gpuplan.runs.cost does for the quoted price.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from gpuplan.providers.base import SpotPricePoint
from gpuplan.runs.cost import CENT_PRECISION, SECONDS_PER_HOUR, exact_seconds


@dataclass(frozen=True)
class SpotBill:
    """The billed cost of one machine's span, its billed seconds and the average price that gives that cost."""

    cost: Decimal
    seconds: Decimal
    average_price_per_hour: Decimal
    steps: int  # price steps that fell in the span (1 = the price never changed)
    history_starts_late: bool  # no point at or before `start`: the first known price was used from `start`


def integrate(points: Sequence[SpotPricePoint], start: dt.datetime, end: dt.datetime,
              min_billed_seconds: int = 0) -> SpotBill | None:
    """The span's cost under the step function `points` (None without a single price point)."""
    ordered = sorted(points, key=lambda p: p.at)
    if not ordered:
        return None
    end = max(end, start)
    before = [p for p in ordered if p.at <= start]
    late = not before
    current = before[-1].price_per_hour if before else ordered[0].price_per_hour
    changes = [p for p in ordered if start < p.at < end]
    total = Decimal(0)
    at = start
    for change in changes:
        total += current * exact_seconds(change.at - at)
        at, current = change.at, change.price_per_hour
    total += current * exact_seconds(end - at)
    seconds = exact_seconds(end - start)
    top_up = max(Decimal(min_billed_seconds) - seconds, Decimal(0))
    start_price = before[-1].price_per_hour if before else ordered[0].price_per_hour
    total += start_price * top_up
    billed = seconds + top_up
    cost = (total / SECONDS_PER_HOUR).quantize(CENT_PRECISION)
    # The price that bills `billed` seconds at `cost`: what the instance row keeps (Money has 6 places, so the
    # row's cost can differ from `cost` by well under a cent: under $0.000001 per hour run).
    average = (total / billed).quantize(CENT_PRECISION) if billed > 0 else start_price
    return SpotBill(cost, billed, average, len(changes) + 1, late)
