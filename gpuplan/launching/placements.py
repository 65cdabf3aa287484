"""Starting a run's machines on a cloud: ranked catalog offers -> placements -> failover, one boot script per node.

gpuplan.launching.start keeps the single provider call (`start_instances`); for every provider but `local` it lands
here:
- the offer chosen at plan time comes first, then the catalog's other offers for the same GPU (same instance
  type in other regions first, then the next instance type), each expanded into the provider's zones;
- gpuplan.launching.failover walks them, and each attempt is handed back to orchestration to be written as an Event;
- the boot script (gpuplan.jobs.bootstrap) is rendered per node: node 0 finds its own address, the others get
  node 0's address as MASTER_ADDR (the provider calls `boot_script_for(rank, master_addr)`); for a provider with
  `node_identity_tags` (AWS) a multi-node run gets one script for every node, which reads its rank and the master's
  address from those instance tags at boot.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpuplan.errors import GpuplanError
from gpuplan.launching.failover import (
    AttemptCallback,
    FailoverResult,
    Placement,
    launch_with_failover,
    provider_zones,
)
from gpuplan.launching.failsafe import MAX_HOURS_AT
from gpuplan.launching.usable import UsableOffers, usable_offers
from gpuplan.launching.zone_prices import ZonePrices, catalog_zone_prices, cheapest_first, priced_in_zone
from gpuplan.providers.base import LaunchRequest, PlacementError, Provider, Scope

MAX_OFFERS = 4  # distinct (region, instance type) pairs tried after the chosen one
MAX_ATTEMPTS = 24  # launch calls at most, whatever the number of zones


@dataclass(frozen=True)
class CloudChoice:
    """One (region, instance type) of the catalog for a job: its cheapest price there for the chosen market."""

    region: str
    instance_type: str
    gpu: str
    gpu_count: float
    price_per_hour: Decimal | None


def ranked_choices(cloud: str, gpu: str | None, gpus_per_node: int | None, *, spot: bool,
                   regions: Sequence[str] = (), max_price: Decimal | None = None,
                   db_url: str | None = None, usable: UsableOffers | None = None,
                   larger: bool = False) -> list[CloudChoice]:
    """The catalog's offers of `gpu` on `cloud` with exactly `gpus_per_node` GPUs, cheapest first.

    `larger` (the spec's `larger_machines: true`) adds machines with more of the GPU, after every exact one: the
    count is the user's request and the quote's basis, never a minimum failover may go past on its own.

    `regions` are the spec's glob patterns (`us-*`); `max_price` caps the hourly price of one node; `usable`
    leaves out offers in regions the account has not enabled and in zones used only when named (Local Zones).
    """
    if not gpu:
        return []
    from gpuplan.catalog import load_offers

    wanted = gpus_per_node or 1
    offers = load_offers(clouds=[cloud], gpus=[gpu], spot=spot, db_url=db_url, min_gpus=wanted,
                         regions=list(regions) or None, max_price=max_price,
                         zones="standard" if usable is None else "all")  # usable.keep: named Local Zones
    best: dict[tuple[str, str], CloudChoice] = {}
    for offer in offers:
        if usable is not None and not usable.keep(offer.region, offer.zone, offer.instance_type, offer.arch):
            continue
        if offer.gpu_count != wanted and not larger:
            continue
        price = offer.price(spot)
        key = (offer.region, offer.instance_type)
        current = best.get(key)
        if current is None or (price is not None and (current.price_per_hour is None or
                                                      price < current.price_per_hour)):
            best[key] = CloudChoice(offer.region, offer.instance_type, offer.gpu, offer.gpu_count, price)
    return sorted(best.values(), key=lambda c: (c.gpu_count != wanted, c.price_per_hour is None,
                                                c.price_per_hour or Decimal(0), c.region, c.instance_type))


def _in_regions(region: str | None, patterns: Sequence[str]) -> bool:
    return not patterns or (region is not None and any(fnmatch.fnmatchcase(region, p) for p in patterns))


def _candidates(request: LaunchRequest) -> list[tuple[str, int]]:
    from gpuplan.jobs.gpu_candidates import parse_candidate

    return [parse_candidate(str(c)) for c in request.options.get("gpu_candidates") or ()]


def placements_for(provider: Provider, request: LaunchRequest,
                   choices: Sequence[CloudChoice] = ()) -> list[Placement]:
    """The chosen offer first (in its catalog zone, then the region's other zones), then the same type in other
    regions, then the next types. Zones are not listed here: failover expands a region into its zones when it
    reaches it, inside its error handling (a region that refuses to list them is blocked, not fatal)."""
    # With zones named by the spec, failover tries exactly those (zones_to_try), not the catalog's zone.
    named = bool(request.options.get("zones"))
    pinned = Placement(provider.name, request.region, request.zones[0] if request.zones and not named else None,
                       request.instance_type, request.price_per_hour, request.spot)
    first = dataclasses.replace(pinned, zone=None)
    type_order: dict[str, int] = {}
    for c in choices:
        type_order.setdefault(c.instance_type, len(type_order))
    if request.instance_type:
        type_order[request.instance_type] = -1
    others = sorted(
        (c for c in choices if (c.region, c.instance_type) != (request.region, request.instance_type)),
        key=lambda c: (type_order[c.instance_type], c.price_per_hour or Decimal(0)))
    return [*([pinned] if pinned.zone else []), first,
            *(Placement(provider.name, c.region, None, c.instance_type, c.price_per_hour, request.spot)
              for c in others[:MAX_OFFERS])]


def zones_to_try(request: LaunchRequest,
                 prices: ZonePrices | None = None) -> Callable[[Provider, Placement], Sequence[str]]:
    """How failover lists a region's zones for this request: the zones the spec names (`resources.zones`, which
    may name a Local Zone), else every standard zone the provider lists, cheapest first by `prices`
    (gpuplan.launching.zone_prices: AWS spot prices differ zone by zone)."""
    named = [str(z) for z in request.options.get("zones") or ()]

    def zones_of(provider: Provider, placement: Placement) -> Sequence[str]:
        if placement.region is None:
            return []
        if named:
            zones = provider.named_zones(placement.region, named)
            if not zones:  # never the region as a whole: the spec asked for these zones only
                raise PlacementError(f"none of the zones the spec names ({', '.join(named)}) is in "
                                     f"{placement.region}", code="NoNamedZone",
                                     scope=Scope(region=placement.region), region=placement.region)
            return zones
        zones = provider_zones(provider, placement.region)
        return cheapest_first(zones, placement.region, placement.instance_type, provider, prices or ZonePrices())

    return zones_of


def outputs_base(request: LaunchRequest, provider: Provider | None) -> str | None:
    """Where the run's nodes ship their outputs: the provider's own storage (e.g. its S3 bucket), else
    `GPUPLAN_STORAGE_URL/<run_id>` (shipped, but only a provider that knows the storage fetches it back)."""
    if provider is not None:
        url = provider.outputs_url(request.run_id)
        if url:
            return url.rstrip("/")
    if request.options.get("run_storage_url"):  # the spec's `storage:` (its run folder), when the provider has none
        return str(request.options["run_storage_url"]).rstrip("/")
    storage = os.environ.get("GPUPLAN_STORAGE_URL")
    return f"{storage.rstrip('/')}/{request.run_id}" if storage else None


def boot_script_renderer(request: LaunchRequest,
                         provider: Provider | None = None) -> Callable[[int, str | None], str]:
    """`(rank, master_addr) -> script`: the job as jobs.bootstrap renders it for one node of this run.

    With a provider that keeps secrets in its cloud's store, the script holds only their names; how the machine
    reads them, ships its outputs and reports its exit code are the provider's hooks (`Provider.boot_cloud`).
    """
    from gpuplan.jobs.bootstrap import boot_plan_for, render_boot_script
    from gpuplan.jobs.runner import NodeLaunch
    from gpuplan.jobs.storage import node_storage_fields

    argv = list(request.options.get("argv") or ["/bin/sh", "-c", request.command])
    base = outputs_base(request, provider)
    gpus = int(request.gpus_per_node or 0)
    by_reference = bool(provider is not None and provider.secrets_by_reference)
    secrets = {} if by_reference else dict(request.secrets)
    params = ({name: provider.secret_parameter(request.run_id, name) for name in sorted(request.secrets)}
              if by_reference and provider is not None else {})
    cloud = provider.boot_cloud() if provider is not None else None

    tags = provider.node_identity_tags if provider is not None and request.nodes > 1 else None

    def render(rank: int, master_addr: str | None, node_addrs: Sequence[str] = ()) -> str:
        if tags:  # one script for every node: it reads its rank and the master's address at boot
            rank, master_addr = 0, None
        node = NodeLaunch(run_id=request.run_id, name=request.name, argv=argv, run_dir=request.run_dir,
                          node_rank=rank, nnodes=request.nodes, nproc_per_node=max(gpus, 1),
                          runtime=request.runtime or "auto", image=request.image, workdir=request.workdir,
                          env=dict(request.env), secret_names=sorted(request.secrets), gpus=gpus,
                          max_hours=request.max_hours, checkpoint_dir=request.options.get("checkpoint_dir"),
                          **node_storage_fields(request.options))
        # With identity tags the script learns its rank at boot and adds `/node-<rank>` to the run's prefix itself.
        storage_url = (base if tags else f"{base}/node-{rank}") if base else None
        return render_boot_script(boot_plan_for(node, secrets=secrets, storage_url=storage_url,
                                                master_addr=master_addr, secret_params=params, cloud=cloud,
                                                rank_tag=tags.rank if tags else None,
                                                master_tag=tags.master_addr if tags else None,
                                                node_ips_tag=(tags.node_ips or None) if tags else None,
                                                node_addrs=node_addrs,
                                                interruption_watch=bool(request.options.get("interruption_watch"))))

    return render


def with_boot_scripts(request: LaunchRequest, provider: Provider | None = None) -> LaunchRequest:
    """The request with a boot script per node (unless the caller already rendered one)."""
    if request.boot_script is not None or "boot_script_for" in request.options:
        return request
    render = boot_script_renderer(request, provider)
    options: dict[str, Any] = {**request.options, "boot_script_for": render}
    return dataclasses.replace(request, boot_script=render(0, None), options=options)


def planned_placements(provider: Provider, request: LaunchRequest, *,
                       db_url: str | None = None) -> list[Placement]:
    """Every placement a launch of `request` may try, in order (the chosen offer first, then the catalog's next).

    Computed before any cloud call so orchestration can record where machines may appear (the `launch_plan`
    event): a later process that finds the launch died knows which regions to search (gpuplan.supervise.adopt).
    """
    patterns = [str(r) for r in request.options.get("regions") or ()]
    max_price = request.options.get("max_price_per_hour")
    archs = request.options.get("image_archs")  # the image's architectures, found at plan time (image_arch)
    usable = usable_offers(provider, [str(z) for z in request.options.get("zones") or ()],
                           archs=[str(a) for a in archs] if archs else None)
    count = int(request.gpus_per_node or 0) or None
    # The chosen GPU's offers first, then those of the spec's other candidate GPUs (`gpu: [A100:8, H100:8]`) at
    # the same count per node: the boot script and the job's processes are laid out for that count.
    gpus = [request.gpu, *(name for name, n in _candidates(request) if name != request.gpu and n == count)]
    choices = []
    for gpu in gpus:
        try:
            choices += ranked_choices(provider.cloud, gpu, count, spot=request.spot, regions=patterns,
                                      max_price=Decimal(str(max_price)) if max_price is not None else None,
                                      db_url=db_url, usable=usable,
                                      larger=bool(request.options.get("larger_machines")))
        except GpuplanError:  # a GPU or cloud the catalog does not know: only the chosen offer is tried
            continue
    if count is not None and len(gpus) > 1:
        choices = [c for c in choices if int(c.gpu_count) == count]
    choices = [c for c in choices if _in_regions(c.region, patterns)]
    return placements_for(provider, request, choices)


def larger_fallbacks(placements: Sequence[Placement], choices: Sequence[CloudChoice],
                     gpus_per_node: int) -> list[CloudChoice]:
    """The placements that would put the job on a machine with more GPUs than it asked for (only with the spec's
    `larger_machines: true`), with their price: said before the launch, so the quote covers them."""
    planned = {(p.region, p.instance_type) for p in placements}
    return [c for c in choices if (c.region, c.instance_type) in planned and c.gpu_count > gpus_per_node]


def start_with_failover(provider: Provider, request: LaunchRequest, *,
                        on_attempt: AttemptCallback | None = None, db_url: str | None = None,
                        placements: Sequence[Placement] | None = None) -> FailoverResult:
    """Launch on the first placement with capacity; FailoverExhausted (with the attempts) when none has.

    `placements`: the ones `planned_placements` returned (and orchestration recorded); computed here if None.
    Each placement's machines get the fail-safe for its own price (`options[MAX_HOURS_AT]`, gpuplan.launching.failsafe:
    a dearer placement spends a budget sooner) and boot scripts rendered with it.
    """
    if placements is None:
        placements = planned_placements(provider, request, db_url=db_url)
    hours_at = request.options.get(MAX_HOURS_AT)
    prices = catalog_zone_prices(provider.cloud, request.gpu, spot=request.spot,
                                 gpu_count=float(request.gpus_per_node or 0) or None, db_url=db_url)

    def prepare(attempt: LaunchRequest) -> LaunchRequest:
        attempt = priced_in_zone(attempt, provider, prices)  # the zone's own price: quoted, recorded, fail-safe
        if callable(hours_at) and attempt.price_per_hour is not None:
            attempt = dataclasses.replace(attempt, max_hours=hours_at(attempt.price_per_hour))
        return with_boot_scripts(attempt, provider) if provider.boots_from_script else attempt

    return launch_with_failover(request, placements, {provider.name: provider}, on_attempt=on_attempt,
                                max_attempts=MAX_ATTEMPTS, prepare=prepare, zones_of=zones_to_try(request, prices))
