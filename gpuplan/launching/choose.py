"""Which offer a spec's run goes to on a provider."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from decimal import Decimal
from typing import Any

from gpuplan.errors import UserError
from gpuplan.jobs.spec import JobSpec
from gpuplan.launching.offer import ChosenOffer
from gpuplan.launching.usable import UsableOffers, usable_offers
from gpuplan.providers.base import Provider


def provider_for(name: str) -> Provider:
    """The provider registered as `name`, configured from the user's config file (gpuplan.config)."""
    from gpuplan.providers.registry import make_provider

    return make_provider(name)


def choose_offer(spec: JobSpec, provider: Provider, *, db_url: str | None = None,
                 archs: Collection[str] | None = None) -> ChosenOffer:
    """The offer for this spec on this provider.

    This machine: itself at its configured price. A cloud the catalog prices: with a workload to plan from, the
    planner's option of lowest total job cost within the spec's resources and limits (`planned_offer`);
    otherwise the cheapest catalog offer for the spec's GPU within its regions and price cap. Either way the
    start tries the next offers on a capacity error (gpuplan.launching.placements). Others (Slurm's charge-back,
    plugins): the spec as asked, at the provider's own quoted rate. `archs`: the catalog architectures the job's
    image runs on (gpuplan.launching.image_arch), None for any.
    """
    from gpuplan.catalog import has_prices

    res = spec.resources
    gpus_per_node = res.gpus_per_node or (1 if res.gpu else 0)
    if provider.runs_here:
        price = provider.quoted_price_per_hour(gpus_per_node, 1)
        return ChosenOffer(provider=provider.name, cloud=provider.cloud, instance_type="localhost", region="local",
                           gpu=res.gpu, gpus_per_node=gpus_per_node, nodes=res.nodes, spot=False,
                           price_per_hour=Decimal(str(price)) if price is not None else Decimal(0),
                           on_this_machine=True)
    region = next((r for r in res.regions if "*" not in r and "?" not in r), None)
    priced = has_prices(provider.cloud)
    # Offers this account cannot launch (a region it has not enabled, a Local Zone the spec does not name) are
    # left out before anything is ranked (gpuplan.launching.usable).
    usable = usable_offers(provider, res.zones, archs) if priced else None
    if priced and spec.workload is not None and spec.workload.total_tokens is not None:
        planned = planned_offer(spec, provider.name, provider.cloud, db_url=db_url, usable=usable)
        if planned is not None:
            return planned
    if res.gpu and priced:
        # The cheapest catalog offer for the GPU (for each candidate GPU) within the spec's regions and price cap
        # (gpuplan.launching.placements tries the others, in order, if this one has no capacity). With no
        # workload there are no hours to weigh, so the hourly price decides between candidates.
        from gpuplan.launching.placements import ranked_choices

        choices = [c for name, count in candidates_of(spec)
                   for c in ranked_choices(provider.cloud, name, count, spot=res.spot, regions=res.regions,
                                           max_price=res.max_price_per_hour, db_url=db_url, usable=usable,
                                           larger=res.larger_machines)]
        if len(res.gpu_candidates) > 1:  # each candidate at its own count, the cheapest hour first
            counts = dict(candidates_of(spec))
            choices = sorted((c for c in choices if any(int(c.gpu_count) == n for n in counts.values())),
                             key=lambda c: (c.price_per_hour is None, c.price_per_hour or Decimal(0)))
        if not choices:
            raise UserError(f"no {provider.cloud} offer in the catalog for {_asked(spec)}"
                            + (f" in {', '.join(res.regions)}" if res.regions else "")
                            + (f" under ${res.max_price_per_hour}/h" if res.max_price_per_hour else "")
                            + " (see `gpuplan prices`)")
        best = choices[0]
        return ChosenOffer(provider=provider.name, cloud=provider.cloud, instance_type=best.instance_type,
                           region=best.region, gpu=best.gpu, gpus_per_node=int(best.gpu_count), nodes=res.nodes,
                           spot=res.spot, price_per_hour=best.price_per_hour)
    # Providers with a configured rate rather than a catalog (Slurm's internal charge-back) quote it per node.
    return ChosenOffer(provider=provider.name, cloud=provider.cloud, region=region, gpu=res.gpu,
                       gpus_per_node=gpus_per_node, nodes=res.nodes, spot=res.spot,
                       price_per_hour=provider.quoted_price_per_hour(gpus_per_node, 1))


def candidates_of(spec: JobSpec) -> list[tuple[str, int]]:
    """The (GPU, count per node) pairs the spec accepts: its `gpu: [A100:8, H100:8]` candidates, or its one GPU."""
    from gpuplan.jobs.gpu_candidates import parse_candidate

    res = spec.resources
    if res.gpu_candidates:
        return [parse_candidate(c) for c in res.gpu_candidates]
    return [(res.gpu, res.gpus_per_node or 1)] if res.gpu else []


def _asked(spec: JobSpec) -> str:
    res = spec.resources
    if len(res.gpu_candidates) > 1:
        return " or ".join(f"{count} x {name}" for name, count in candidates_of(spec))
    return f"{res.gpus_per_node or 1} x {res.gpu}"


def planned_offer(spec: JobSpec, provider_name: str, cloud: str, *, db_url: str | None = None,
                  usable: UsableOffers | None = None) -> ChosenOffer | None:
    """The cheapest planner option on `cloud` that respects the spec; None when the workload cannot be planned.

    The spec's `resources` narrow the search (gpu, gpus_per_node, regions, spot: true -> spot only, otherwise
    on-demand only, so nobody gets spot without asking; exactly the spec's nodes, which its command may rely on)
    and its limits
    bound it (budget, max_price_per_hour, deadline). Nothing that fits is a UserError carrying the planner's
    first reasons, so `gpuplan plan job.yaml --explain` can tell the rest.
    """
    from gpuplan.catalog.catalog import Catalog
    from gpuplan.catalog.gpu_names import compile_region_patterns, resolve_gpus
    from gpuplan.estimating.from_job import workload_from_job
    from gpuplan.planning.planner import Constraints, plan

    res, limits = spec.resources, spec.limits
    try:
        workload, own = workload_from_job(spec.workload)
    except ValueError:
        return None
    deadline_hours = None
    if limits.deadline is not None:
        at = limits.deadline_at(dt.datetime.now(dt.timezone.utc))
        assert at is not None
        deadline_hours = (at - dt.datetime.now(dt.timezone.utc)).total_seconds() / 3600
    constraints = Constraints(
        deadline_hours=deadline_hours, budget_usd=limits.budget_usd, spot=bool(res.spot),
        max_price_per_hour=res.max_price_per_hour, nodes=res.nodes,
    )
    catalog = Catalog.load(db_url, (cloud,))
    accepted = {(resolve_gpus(name), count) for name, count in candidates_of(spec)}
    names = ",".join(name for name, _ in candidates_of(spec))
    offers = catalog.select(gpus=resolve_gpus(names) if names else None, clouds=(cloud,),
                            regions=compile_region_patterns(",".join(res.regions)) if res.regions else None,
                            zones="standard" if usable is None else "all")  # usable.keep: named Local Zones
    if usable is not None:
        offers = [o for o in offers if usable.keep(o.region, o.zone, o.instance_type, o.arch)]
    from gpuplan.calibration.startup import startup_allowance
    from gpuplan.planning.job_cost import billing_minimums

    result = plan(workload, offers, constraints=constraints, throughput_for=lambda _gpu: own,
                  spot_model=spot_model_for(spec, db_url),
                  startup_s={cloud: startup_allowance(provider_name, db_url).seconds},
                  min_billed_seconds=billing_minimums((cloud,)))
    # Options come ranked by the whole job's cost: with candidates, the first that is one of them wins.
    wanted = [o for o in result.options
              if (res.gpus_per_node is None or not accepted
                  or any(o.gpu in names_ and o.gpus_per_node == count for names_, count in accepted))
              and o.nodes == res.nodes]
    if not wanted:
        reasons = sorted({o.reason for o in result.rejected if o.reason})[:3]
        raise UserError(f"no {cloud} offer fits {spec.name}"
                        + (f": {'; '.join(reasons)}" if reasons else " within its resources and limits")
                        + f" (see `gpuplan plan JOB.yaml --cloud {cloud} --explain`)")
    best = wanted[0]
    price = best.price_per_hour / best.nodes if best.price_per_hour is not None else None
    return ChosenOffer(provider=provider_name, cloud=cloud, instance_type=best.instance_type, region=best.region,
                 zone=best.zone, gpu=best.gpu, gpus_per_node=int(best.gpus_per_node), nodes=best.nodes,
                 spot=best.spot, price_per_hour=price)


def spot_model_for(spec: JobSpec, db_url: str | None = None) -> Any:
    """The planner's spot interruption model with the spec's checkpoint interval (plan and launch share it), and
    the work past relaunches lost per interruption where the store at `db_url` has any."""
    from gpuplan.planning.planner import DEFAULT_CHECKPOINT_HOURS, SpotModel
    from gpuplan.runs.interruption_loss import measured_loss

    interval = spec.checkpoint.interval if spec.checkpoint and spec.checkpoint.interval else None
    measured = measured_loss(db_url)
    return SpotModel(checkpoint_hours=interval or DEFAULT_CHECKPOINT_HOURS,
                     measured_loss_hours=measured.hours if measured is not None else None)
