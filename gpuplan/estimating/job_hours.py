"""One breakdown of a job's hours, shared by `gpuplan plan` and `gpuplan launch` so both quote the same time.

A job's wall time has three parts: the compute (tokens / throughput, gpuplan.estimating.estimate), the provider's
start-up allowance (machine boot, image pull, torch start: gpuplan.calibration.startup) and, on spot, the work expected
to be lost to interruptions (gpuplan.planning.planner.SpotModel's stretch of the compute). The planner ranks offers by
it and launch records it; when each composed the parts itself they quoted different hours for the same job (plan left
out the start-up, launch the spot interruptions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class HoursBreakdown:
    """Hours of one job on one offer: compute + start-up + expected spot interruptions = total."""

    compute: float
    startup: float = 0.0
    interruptions: float = 0.0

    @property
    def total(self) -> float:
        return self.compute + self.startup + self.interruptions

    def as_dict(self) -> dict[str, Any]:
        return {"compute_hours": self.compute, "startup_hours": self.startup,
                "interruption_hours": self.interruptions, "total_hours": self.total}


def job_hours(compute_hours: float, *, startup_s: float = 0.0, stretch: float | None = None) -> HoursBreakdown:
    """The breakdown for `compute_hours` of work, a start-up of `startup_s` seconds and, on spot, the
    interruption `stretch` of the compute (SpotModel.stretch; None or 1: no interruptions expected)."""
    lost = compute_hours * (stretch - 1) if stretch is not None else 0.0
    return HoursBreakdown(compute=compute_hours, startup=startup_s / 3600, interruptions=lost)
