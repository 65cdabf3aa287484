"""The hourly price an adopted machine is billed at, and where that price came from.

An adopted machine (gpuplan.supervise.adopt) was started by a launch that died before recording it, so its price has to
be found again. In order of trust:
1. `launch_plan`: what the dead launch's plan quoted for that region and instance type — the price the user was
   shown and agreed to; it wins over everything the adopter's own environment says (a shell without
   GPUPLAN_LOCAL_PRICE_PER_HOUR would otherwise bill an adopted local job at $0);
2. `run`: the price of another row of the run with the same region and type (the launch's offer);
3. `cloud`: the provider's own answer (a price tag on the AWS machine, the local or Slurm configured rate);
4. `catalog`: the price catalog (the newest complete refresh of that cloud, else the shipped snapshot) for the
   machine's cloud, region, instance type (and GPU, where a GCE host type carries different GPUs) and market
   (spot or on-demand). Where the machine's zone is in the catalog its price is used; otherwise the highest
   price of the region (AWS catalogs name zones by AZ id, machines by AZ name), so the books err towards the
   larger bill: the promise is no surprise bills, and a budget cap must not trip late.
Only when none knows is the machine billed at 0 (`none`), and the `adopted` event says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from gpuplan.catalog import KNOWN_CLOUDS, Catalog, Offer
from gpuplan.launching.launch_plan import launch_plans
from gpuplan.providers.base import Instance
from gpuplan.runs.payloads import QuoteData

if TYPE_CHECKING:
    from gpuplan.store.models import Run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PriceQuote:
    """A price for one adopted machine: None only when source is `none`; `detail` says which catalog or plan."""

    price: Decimal | None
    source: str  # cloud | launch_plan | run | catalog | none
    detail: str | None = None

    def as_payload(self) -> QuoteData:
        """The form recorded in the `adopted` event's data."""
        return QuoteData(source=self.source, price_per_hour=self.price, detail=self.detail)


def planned_price(run: Run, inst: Instance) -> Decimal | None:
    """The price the newest launch plan quoted for the machine's region and type; None when nothing matches."""
    for _, plan in reversed(launch_plans(run)):
        for p in plan.placements:
            if p.price_per_hour is None:
                continue
            if p.instance_type in (None, inst.instance_type) and p.region in (None, inst.region):
                return p.price_per_hour
    return None


def recorded_price(run: Run, inst: Instance) -> Decimal | None:
    """The price of a row the run already has for the same region and type (the launch's offer); a row billed
    at 0 is no quote (an earlier adoption that found no price records 0)."""
    for row in run.instances:
        if row.instance_type == inst.instance_type and row.region == inst.region and row.price_per_hour:
            return Decimal(row.price_per_hour)
    return None


def catalog_offer(offers: tuple[Offer, ...], inst: Instance, cloud: str) -> tuple[Decimal, Offer] | None:
    """The catalog's price for the machine (see the module doc for the rule), with the offer it came from."""
    if not inst.region or not inst.instance_type:
        return None
    found = [o for o in offers if o.cloud == cloud and o.region == inst.region
             and o.instance_type == inst.instance_type and o.price(inst.spot) is not None]
    if inst.gpu:  # a GCE n1 host type is offered with several GPUs attached: only the machine's own count
        found = [o for o in found if o.gpu == inst.gpu and (not inst.gpu_count or o.gpu_count == inst.gpu_count)]
    same_zone = [o for o in found if inst.zone and o.zone == inst.zone]
    pool = same_zone or found
    if not pool:
        return None
    offer = max(pool, key=lambda o: o.price(inst.spot) or Decimal(0))
    price = offer.price(inst.spot)
    assert price is not None
    return price, offer


class AdoptionPricer:
    """Prices the machines of one adoption. The catalog is loaded at most once, and only if a machine needs it
    (loading it costs a file parse and, on PostgreSQL, a connection)."""

    def __init__(self, run: Run, cloud: str, db_url: str | None) -> None:
        self.run = run
        self.cloud = cloud
        self.db_url = db_url
        self._catalog: Catalog | None = None
        self._catalog_tried = False

    def quote(self, inst: Instance) -> PriceQuote:
        """The machine's price and its source, trying the sources in the module doc's order."""
        price = planned_price(self.run, inst)
        if price is not None:
            return PriceQuote(price, "launch_plan")
        price = recorded_price(self.run, inst)
        if price is not None:
            return PriceQuote(price, "run")
        if inst.price_per_hour is not None:
            return PriceQuote(inst.price_per_hour, "cloud")
        cloud = inst.cloud or self.cloud
        catalog = self.catalog(cloud)
        found = catalog_offer(catalog.offers, inst, cloud) if catalog is not None else None
        if found is None:
            return PriceQuote(None, "none")
        price, offer = found
        market = "spot" if inst.spot else "on-demand"
        where = f"{offer.region}/{offer.zone}" if offer.zone else offer.region
        return PriceQuote(price, "catalog",
                          f"{offer.source} ({offer.fetched_at:%Y-%m-%d}): {offer.instance_type} {market} in {where}")

    def catalog(self, cloud: str) -> Catalog | None:
        """The cloud's catalog, or None for a provider the catalog does not price (local, Slurm) or when it
        cannot be read: a price lookup must never stop an adoption, which is what ends unknown machines."""
        if cloud not in KNOWN_CLOUDS:
            return None
        if not self._catalog_tried:
            self._catalog_tried = True
            try:
                self._catalog = Catalog.load(self.db_url, KNOWN_CLOUDS)
            except Exception as exc:  # any failure: the machine is recorded unpriced, and the event says so
                log.warning("cannot read the price catalog for an adopted machine: %s", exc)
        return self._catalog
