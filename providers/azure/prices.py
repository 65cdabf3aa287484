"""Azure GPU VM prices from the Azure Retail Prices API, which needs no account.

https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices: an unauthenticated GET of
`https://prices.azure.com/api/retail/prices` with an OData `$filter` answers pages of at most 100 `Items`, and a
`NextPageLink` to the next page (empty on the last). Prices are USD (`currencyCode`) per `unitOfMeasure` ("1 Hour"
for VMs); `type` is Consumption (pay as you go), Reservation or DevTestConsumption. A VM's spot meter has a
`skuName` ending in " Spot" (spot prices are public here), its Low Priority meter (Batch) " Low Priority", and
Windows meters a `productName` ending in " Windows". GPU VMs are the N-series (`armSkuName` Standard_N...).
Filter values are case-sensitive in API version 2023-01-01-preview.

Kept small and free of the catalog: this module reads the API; providers/azure/pricing.py makes catalog offers.
The endpoint moves with GPUPLAN_AZURE_PRICES_URL (tests serve recorded pages on 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import IO, Any

DEFAULT_URL = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"
GPU_FILTER = ("serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and "
              "startswith(armSkuName, 'Standard_N')")
MAX_PAGES = 500  # N-series Linux+Windows, spot and low priority, every region: a few thousand meters

Opener = Callable[[str], IO[bytes]]


@dataclass(frozen=True)
class VmPrice:
    """One VM size's hourly USD prices in one region (None: not offered that way)."""

    sku: str  # armSkuName, e.g. Standard_ND96asr_v4
    region: str  # armRegionName, e.g. eastus
    on_demand: Decimal | None
    spot: Decimal | None


Progress = Callable[[str], None]


def endpoint(base: str | None = None) -> str:
    """Where the API is: `base`, else GPUPLAN_AZURE_PRICES_URL, else Microsoft's."""
    return base or os.environ.get("GPUPLAN_AZURE_PRICES_URL") or DEFAULT_URL


def gpu_filter(regions: Sequence[str] | None = None) -> str:
    """The OData $filter: N-series meters, in `regions` only when given (armRegionName, e.g. eastus). Region names
    reach here checked by the CLI (letters, digits and dashes: gpuplan.catalog.gpu_names.compile_region_patterns),
    so no quote can end the string literal."""
    if not regions:
        return GPU_FILTER
    for region in regions:
        if not region.replace("-", "").isalnum():
            raise ValueError(f"Azure prices: {region!r} is not a region name")
    anyof = " or ".join(f"armRegionName eq '{r}'" for r in regions)
    return f"{GPU_FILTER} and ({anyof})"


def first_url(base: str | None = None, regions: Sequence[str] | None = None) -> str:
    query = urllib.parse.urlencode({"api-version": API_VERSION, "$filter": gpu_filter(regions)},
                                   quote_via=urllib.parse.quote)
    return f"{endpoint(base)}?{query}"


def _meter(item: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(sku, region, "on_demand" | "spot") for a Linux pay-as-you-go hourly USD meter, else None."""
    if (item.get("type") != "Consumption" or item.get("unitOfMeasure") != "1 Hour"
            or item.get("currencyCode") != "USD" or str(item.get("productName", "")).endswith(" Windows")):
        return None
    sku_name = str(item.get("skuName", ""))
    if sku_name.endswith(" Low Priority"):
        return None
    sku, region = item.get("armSkuName"), item.get("armRegionName")
    if not sku or not region:
        return None
    return str(sku), str(region), "spot" if sku_name.endswith(" Spot") else "on_demand"


def parse_items(items: Iterable[Mapping[str, Any]]) -> list[VmPrice]:
    """Meters -> one VmPrice per (sku, region): its Linux on-demand and spot hourly prices."""
    found: dict[tuple[str, str], dict[str, Decimal]] = {}
    for item in items:
        meter = _meter(item)
        price = item.get("retailPrice")
        if meter is None or price is None or Decimal(str(price)) <= 0:
            continue
        sku, region, kind = meter
        prices = found.setdefault((sku, region), {})
        value = Decimal(str(price))
        prices[kind] = min(value, prices.get(kind, value))
    return [VmPrice(sku, region, p.get("on_demand"), p.get("spot")) for (sku, region), p in sorted(found.items())]


def _open(url: str) -> IO[bytes]:
    return urllib.request.urlopen(url, timeout=60)


def fetch_vm_prices(opener: Opener = _open, base: str | None = None, regions: Sequence[str] | None = None,
                    progress: Progress | None = None) -> list[VmPrice]:
    """Every page of GPU VM meters, parsed. A NextPageLink must stay on the first page's host. `progress` hears
    one line per page read (a full refresh is a few dozen pages of 100 meters)."""
    start = first_url(base, regions)
    host = urllib.parse.urlsplit(start).netloc
    url: str | None = start
    items: list[Mapping[str, Any]] = []
    for number in range(1, MAX_PAGES + 1):
        if not url:
            return parse_items(items)
        with opener(url) as fh:
            page = json.load(fh)
        items += page.get("Items") or []
        url = page.get("NextPageLink") or None
        if progress is not None:
            progress(f"azure: page {number} read, {len(items)} meters so far"
                     + ("; next page ..." if url else ""))
        if url and urllib.parse.urlsplit(url).netloc.split(":")[0] != host.split(":")[0]:
            raise ValueError(f"Azure prices: NextPageLink leaves {host}: {url}")
    raise ValueError(f"Azure prices: more than {MAX_PAGES} pages")
