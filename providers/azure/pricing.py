"""Azure's price capability: `gpuplan catalog refresh --cloud azure` from the public Retail Prices API.

The API needs no account and has the Spot meters too (providers/azure/prices.py), so the public source is the
whole refresh, with or without credentials: nothing is kept from the previous snapshot. Each (size, region) with a
Linux pay-as-you-go or Spot price becomes one catalog offer, priced per hour per VM (what Azure bills; the GPUs are
part of the size, unlike GCP), with the size's GPUs, vCPUs and RAM from providers/azure/vm_sizes.py. Azure prices a
size per region, not per zone, so the offers carry no zone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar

from gpuplan.catalog.gpu_memory import vendor_gpu_memory_gb
from gpuplan.catalog.offer import Offer
from gpuplan.catalog.price_refresh import PriceRefresh
from gpuplan.providers.azure.prices import API_VERSION, VmPrice, endpoint, fetch_vm_prices
from gpuplan.providers.azure.vm_sizes import vm_size
from gpuplan.providers.base import PublishesPrices, RefreshesPrices

SHOWN_SKIPPED = 8  # sizes named in the refresh's note; the rest are counted


def source_text() -> str:
    return f"azure: Retail Prices API ({endpoint()}, api-version {API_VERSION})"


def offers_from_prices(prices: Iterable[VmPrice], now: dt.datetime, source: str) -> tuple[list[Offer], list[str]]:
    """Catalog offers for the sizes vm_sizes knows, and a note naming the GPU sizes it does not."""
    offers: list[Offer] = []
    skipped: set[str] = set()
    for price in prices:
        size = vm_size(price.sku)
        if size is None:
            skipped.add(price.sku)
            continue
        offers.append(Offer(
            cloud="azure", region=price.region, zone=None, instance_type=price.sku, gpu=size.gpu,
            gpu_count=size.gpus, gpu_memory_gb=vendor_gpu_memory_gb(size.gpu, size.gpus),
            vcpus=float(size.vcpus), memory_gb=float(size.memory_gib), price_per_hour=price.on_demand,
            spot_price_per_hour=price.spot, arch="x86_64", source=source, fetched_at=now,
        ))
    notes = []
    if skipped:
        named = ", ".join(sorted(skipped)[:SHOWN_SKIPPED])
        more = f" and {len(skipped) - SHOWN_SKIPPED} more" if len(skipped) > SHOWN_SKIPPED else ""
        notes.append(f"azure: {len(skipped)} N-series sizes left out (no GPU gpuplan plans for, or not in "
                     f"providers/azure/vm_sizes.py): {named}{more}")
    return offers, notes


class AzurePricing(RefreshesPrices, PublishesPrices):
    """Mixed into AzureProvider: the Retail Prices API, which anyone may read."""

    account_needed_for: ClassVar[str] = "per-size Spot eviction rates (Azure Resource Graph, SpotResources)"
    public_source_complete: ClassVar[bool] = True

    @classmethod
    def has_price_credentials(cls) -> bool:
        """The Retail Prices API takes none: a refresh never depends on them."""
        return False

    def refresh_prices(self, regions: Sequence[str] | None, now: dt.datetime) -> PriceRefresh:
        return self._refresh(regions, now, None)

    def refresh_public_prices(self, regions: Sequence[str] | None, now: dt.datetime, previous: Sequence[Offer],
                              origin: str, progress: Callable[[str], None] | None = None) -> PriceRefresh:
        """The whole refresh: the public source lacks nothing, so `previous` and `origin` are not needed."""
        return self._refresh(regions, now, progress)

    def _refresh(self, regions: Sequence[str] | None, now: dt.datetime,
                 progress: Callable[[str], None] | None) -> PriceRefresh:
        source = source_text()
        offers, notes = offers_from_prices(fetch_vm_prices(regions=regions, progress=progress), now, source)
        return PriceRefresh(offers=offers, source=source, notes=notes)
