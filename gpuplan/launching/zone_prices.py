"""Each placement at its own zone's price: the price a launch quotes, records and sets the fail-safe with.

AWS spot prices differ zone by zone (DescribeSpotPriceHistory answers per AvailabilityZone,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html): in one snapshot
p5.48xlarge costs $17.63/h in use1-az6 and $55.04/h in use1-az1. Failover expands a region into its zones, so a
placement that kept the region's cheapest price would record (and budget, and time its fail-safe for) a price that
zone never charges. Here every zone gets its own catalog price (the catalog names AWS zones by id, so the provider
maps its zone names: `Provider.catalog_zone`); a zone the catalog does not list gets the region's dearest price, so
the books err towards the larger bill, as adopted machines do (gpuplan.supervise.adopt_price).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from gpuplan.catalog.offer import Offer
from gpuplan.providers.base import LaunchRequest, Provider

Key = tuple[str, str]  # (region, instance type)


@dataclass(frozen=True)
class ZonePrices:
    """One market's catalog prices per (region, instance type): by zone, and the region's dearest zone."""

    by_zone: dict[tuple[str, str, str], Decimal] = field(default_factory=dict)
    dearest: dict[Key, Decimal] = field(default_factory=dict)

    @classmethod
    def of(cls, offers: Iterable[Offer], *, spot: bool, gpu_count: float | None = None) -> ZonePrices:
        """From catalog offers of one GPU (every zone type); `gpu_count` keeps a GCE n1 host's own GPU count."""
        prices = cls()
        for offer in offers:
            price = offer.price(spot)
            if price is None or (gpu_count and offer.gpu_count != gpu_count):
                continue
            key = (offer.region, offer.instance_type)
            if offer.zone:
                prices.by_zone[(*key, offer.zone)] = price
            prices.dearest[key] = max(price, prices.dearest.get(key, price))
        return prices

    def price(self, region: str, instance_type: str, zone: str) -> Decimal | None:
        """The zone's price; the region's dearest for a zone the catalog lacks; None for a type it lacks."""
        return self.by_zone.get((region, instance_type, zone), self.dearest.get((region, instance_type)))


def catalog_zone_prices(cloud: str, gpu: str | None, *, spot: bool, gpu_count: float | None,
                        db_url: str | None) -> ZonePrices:
    """The catalog's zone prices for the request's GPU on `cloud` (empty for a GPU or cloud it does not price)."""
    from gpuplan.catalog import load_offers
    from gpuplan.errors import GpuplanError
    from gpuplan.providers.registry import catalog_clouds

    if not gpu or cloud not in catalog_clouds():
        return ZonePrices()
    try:
        offers = load_offers(clouds=[cloud], gpus=[gpu], spot=spot, db_url=db_url, zones="all")
    except GpuplanError:  # a GPU the catalog does not know: the offer's own price stands
        return ZonePrices()
    return ZonePrices.of(offers, spot=spot, gpu_count=gpu_count)


def priced_in_zone(request: LaunchRequest, provider: Provider, prices: ZonePrices) -> LaunchRequest:
    """The request at its zone's catalog price (unchanged when it names no zone or the catalog has no price)."""
    if not request.zones or not request.region or not request.instance_type:
        return request
    zone = provider.catalog_zone(request.region, request.zones[0])
    price = prices.price(request.region, request.instance_type, zone)
    if price is None or price == request.price_per_hour:
        return request
    return dataclasses.replace(request, price_per_hour=price)


def cheapest_first(zones: Sequence[str], region: str, instance_type: str | None, provider: Provider,
                   prices: ZonePrices) -> list[str]:
    """The zones in order of their price (cheapest first; unpriced ones after, in the provider's order)."""
    if not instance_type or not prices.by_zone:
        return list(zones)

    def key(item: tuple[int, str]) -> tuple[int, Decimal, int]:
        index, zone = item
        price = prices.by_zone.get((region, instance_type, provider.catalog_zone(region, zone)))
        return (price is None, price or Decimal(0), index)

    return [zone for _, zone in sorted(enumerate(zones), key=key)]
