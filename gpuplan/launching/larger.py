"""Machines with more GPUs than the spec asks for: tried by failover only with the spec's `larger_machines: true`,
and then listed with their price before the launch, so nobody is billed for GPUs they never saw quoted."""

from __future__ import annotations

from gpuplan.launching.offer import LaunchPlan
from gpuplan.launching.placements import CloudChoice, larger_fallbacks, planned_placements, ranked_choices
from gpuplan.launching.start import build_request
from gpuplan.providers.base import Provider

PREVIEW_RUN_ID = "r-preview"  # the request is only planned, never sent: no run exists yet


def larger_machines_offered(provider: Provider, plan: LaunchPlan, *, db_url: str | None = None) -> list[CloudChoice]:
    """The larger machines the launch's failover may try, in order, each with its hourly price per node."""
    res = plan.spec.resources
    if not res.larger_machines or not provider.tries_placements or not plan.offer.gpu:
        return []
    request = build_request(plan, PREVIEW_RUN_ID, "", {})
    placements = planned_placements(provider, request, db_url=db_url)
    wanted = int(request.gpus_per_node or 1)
    choices = ranked_choices(provider.cloud, request.gpu, wanted, spot=request.spot, regions=res.regions,
                             db_url=db_url, larger=True)
    return larger_fallbacks(placements, choices, wanted)
