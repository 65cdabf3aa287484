"""What a job costs on an offer, exactly: price x nodes x billed hours, in Decimal, never rounded before ranking.

`plan` ranks and tags its options on this figure and `estimate` prices its cheapest offers with it, so a job of a
few minutes is ranked by its real cost (g6.xlarge at $0.0913/h before g6.4xlarge at $0.15/h for the same time),
not by two costs that both round to $0.01. Each cloud bills at least a minimum (AWS and Google Compute Engine: 60 s
for a Linux instance, then per second; the provider's `min_billed_seconds`, with its documentation cited there),
so a 20-second job is priced as 60 s. Amounts keep the books' precision (six decimal places: the store's Money
column) and are rounded only for display (gpuplan.cli.display.dollars).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

BOOK_PLACES = Decimal("0.000001")  # gpuplan.store.types.Money is Numeric(16, 6)


def billed_hours(hours: float, min_billed_seconds: int = 0) -> Decimal:
    """The hours a cloud charges for `hours` of running: at least its minimum."""
    return max(Decimal(repr(hours)), Decimal(min_billed_seconds) / Decimal(3600))


def job_cost(price_per_hour: Decimal, nodes: int, hours: float, *, min_billed_seconds: int = 0) -> Decimal:
    """price x nodes x billed hours, to the books' precision (a micro-dollar)."""
    return cost_of_billed(price_per_hour, nodes, billed_hours(hours, min_billed_seconds))


def cost_of_billed(price_per_hour: Decimal, nodes: int, billed: Decimal) -> Decimal:
    """job_cost from the billed hours (billed_hours), for a caller that prices the same hours at many prices: the
    planner bills one node count of an instance type once and prices it in every region."""
    return (price_per_hour * nodes * billed).quantize(BOOK_PLACES)


def billing_minimums(clouds: Iterable[str]) -> Mapping[str, int]:
    """Each cloud's minimum billed seconds, from its provider (0 for a cloud no provider registers)."""
    from gpuplan.providers.registry import UnknownProviderError, load_provider_class

    minimums = {}
    for cloud in set(clouds):
        try:
            minimums[cloud] = int(load_provider_class(cloud).min_billed_seconds)
        except UnknownProviderError:
            minimums[cloud] = 0
    return minimums
