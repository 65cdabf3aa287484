"""What one node count of one instance type gives in one market, whatever the region and price.

The planner prices each instance type in every region that sells it (some 20 regions per type in the shipped
catalog), at one or more node counts. The estimate, the spot stretch, the hours and the hours a cloud bills depend
on the GPU shape, the type's network, the node count, the cloud and the market, never on the region or price: the
planner computes them once per (instance type, market, node count) here, and only the price x nodes x billed hours
and the Option itself per offer (issue 33 item 4: the per-offer work was most of a plan's time).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from gpuplan.estimating.job_hours import HoursBreakdown, job_hours
from gpuplan.estimating.values import Estimate
from gpuplan.limits import within
from gpuplan.planning.job_cost import billed_hours


@dataclass(frozen=True, slots=True)
class CountTiming:
    """One node count of one instance type in one market: its estimate (or why there is none), the spot stretch,
    the hours, the reason an option there cannot run (None: it can) and the hours the cloud bills (None: no cost,
    for no estimate or hours past the sane limit)."""

    estimate: Estimate | str
    stretch: float | None = None
    hours: HoursBreakdown | None = None
    reason: str | None = None
    billed: Decimal | None = None

    def misses_deadline_only(self, deadline: float) -> bool:
        """Fits, runs (on spot: makes progress), has a cost and takes longer than `deadline` hours: the planner
        then tries more nodes without building an option for this count."""
        return self.billed is not None and self.reason is None and self.hours is not None \
            and self.hours.total > deadline


def count_timing(estimate: Estimate | str, *, spot: bool, stretch: float | None, startup_s: float,
                 min_billed_seconds: int, nodes: int) -> CountTiming:
    """The timing of `nodes` nodes from their estimate: `stretch` is the spot model's for this cloud and count
    (None on demand, or when interruptions leave no progress), `startup_s` the cloud's start-up allowance and
    `min_billed_seconds` its billing minimum (gpuplan.planning.job_cost)."""
    if isinstance(estimate, str):
        return CountTiming(estimate, reason=estimate)
    reason = None if estimate.fits else (estimate.fit_hint or "does not fit in GPU memory")
    if spot and stretch is None:
        reason = f"spot interruptions on {nodes} nodes leave no progress"
    breakdown = job_hours(estimate.wall_hours, startup_s=startup_s, stretch=stretch)
    hours = breakdown.total
    if not within("hours", hours):  # 1e18 tokens of a 1e15-parameter model: finite, but no plan
        return CountTiming(estimate, stretch, breakdown, f"takes {hours:.3g} h, more than 100 years")
    return CountTiming(estimate, stretch, breakdown, reason, billed_hours(hours, min_billed_seconds))
