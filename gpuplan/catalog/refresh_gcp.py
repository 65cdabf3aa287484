"""Live GCP GPU prices: Cloud Billing Catalog SKUs composed with Compute machine and accelerator types.

GCP bills a GPU VM as parts: vCPUs and RAM of the machine series (`A2 Instance Core`, `N1 Predefined Instance
Ram`, ...) plus each attached GPU (`Nvidia Tesla T4 GPU`), priced per region; spot SKUs are the
`Preemptible` usage type. `list_skus` on Compute Engine gives those unit prices; `machineTypes` (vCPUs, memory,
built-in accelerators of a2/a3/a4/g2) and `acceleratorTypes` (which GPUs each zone has, and how many fit one VM)
say what exists where. An offer's price = vCPUs x core + GiB x RAM + GPUs x GPU.

n1 hosts (which the shipped snapshot lacks) get T4/V100/P100/P4 attached in counts 1, 2, 4, 8 up to the zone's
maximum per VM, on the smallest n1-standard with at least 4 vCPUs per GPU (a common sizing; GCP allows more).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gpuplan.catalog.gcp_clients import BILLING_OVERRIDE, COMPUTE_OVERRIDE, client_kwargs
from gpuplan.catalog.gpu_memory import vendor_gpu_memory_gb
from gpuplan.catalog.gpu_names import (
    GCP_ACCELERATOR_GPU,
    GCP_ACCELERATOR_MEMORY_GB,
    GCP_N1_ACCELERATORS,
    gcp_machine_gpu,
    gcp_machine_series,
)
from gpuplan.catalog.offer import Offer

COMPUTE_ENGINE_SERVICE = "services/6F81-5844-456A"
SOURCE = "gcp: billing list_skus + compute machineTypes/acceleratorTypes"
N1_HOST_SERIES = "n1-standard"
VCPUS_PER_ATTACHED_GPU = 4
ATTACH_COUNTS = (1, 2, 4, 8)

# Billing SKU GPU model (from "Nvidia Tesla T4 GPU running in ...") -> accelerator type.
SKU_GPU_MODEL: dict[str, str] = {
    "T4": "nvidia-tesla-t4",
    "V100": "nvidia-tesla-v100",
    "P100": "nvidia-tesla-p100",
    "P4": "nvidia-tesla-p4",
    "A100": "nvidia-tesla-a100",
    "A100 80GB": "nvidia-a100-80gb",
    "H100 80GB": "nvidia-h100-80gb",
    "H100 80GB Mega": "nvidia-h100-mega-80gb",
    "H200 141GB": "nvidia-h200-141gb",
    "B200": "nvidia-b200",
    "L4": "nvidia-l4",
}
_GPU_SKU = re.compile(r"^(?:Spot Preemptible )?Nvidia (?:Tesla )?(?P<model>[A-Z]\d+[A-Za-z0-9 ]*?) GPU\b")
_CORE_RAM_SKU = re.compile(
    r"^(?:Spot Preemptible )?(?P<series>[A-Z]\d+[A-Z]?) (?:Predefined )?Instance (?P<kind>Core|Ram) running in"
)
# SKUs for other purchase models that share the GPU's description (committed use, DWS, calendar mode).
_OTHER_MODELS = re.compile(r"Commit|DWS|Calendar|Reserv|Flex|Sole Tenancy|Custom", re.IGNORECASE)
USAGE_MARKETS = {"OnDemand": False, "Preemptible": True}  # usage type -> is spot


@dataclass
class UnitPrices:
    """Per region: unit prices keyed by ("gpu", accelerator type) / ("core"|"ram", series), per market."""

    by_region: dict[str, dict[tuple[str, str, bool], Decimal]] = field(default_factory=dict)

    def add(self, region: str, key: tuple[str, str], spot: bool, price: Decimal) -> None:
        self.by_region.setdefault(region, {})[(*key, spot)] = price

    def get(self, region: str, kind: str, name: str, spot: bool) -> Decimal | None:
        return self.by_region.get(region, {}).get((kind, name, spot))


@dataclass(frozen=True)
class MachineType:
    zone: str
    name: str
    vcpus: int
    memory_gib: float
    accelerator: str | None
    accelerator_count: int


@dataclass(frozen=True)
class AcceleratorType:
    zone: str
    name: str
    max_per_vm: int


@dataclass
class GcpFetch:
    offers: list[Offer]
    regions: list[str]
    notes: list[str] = field(default_factory=list)


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def sku_unit_price(sku: Any) -> Decimal | None:
    """USD per unit of the SKU's first-tier (start 0) rate; None when it has no USD rate."""
    for info in sku.pricing_info:
        expression = info.pricing_expression
        for rate in expression.tiered_rates:
            if rate.start_usage_amount == 0 and rate.unit_price.currency_code in ("USD", ""):
                return Decimal(rate.unit_price.units) + Decimal(rate.unit_price.nanos) / Decimal(10**9)
    return None


def parse_skus(skus: Iterable[Any]) -> UnitPrices:
    """Pick the GPU, core and RAM unit prices out of the Compute Engine SKUs."""
    prices = UnitPrices()
    for sku in skus:
        spot = USAGE_MARKETS.get(sku.category.usage_type)
        description = sku.description
        if spot is None or _OTHER_MODELS.search(description):
            continue
        key: tuple[str, str] | None = None
        unit = "h"
        gpu = _GPU_SKU.match(description)
        if gpu and gpu.group("model") in SKU_GPU_MODEL:
            key = ("gpu", SKU_GPU_MODEL[gpu.group("model")])
        else:
            core_ram = _CORE_RAM_SKU.match(description)
            if core_ram:
                kind = core_ram.group("kind").lower()
                key, unit = (kind, core_ram.group("series").lower()), ("h" if kind == "core" else "GiBy.h")
        if key is None:
            continue
        usage_units = {info.pricing_expression.usage_unit for info in sku.pricing_info}
        price = sku_unit_price(sku)
        if price is None or unit not in usage_units:
            continue
        for region in sku.service_regions:
            prices.add(region, key, spot, price)
    return prices


def compose_offers(prices: UnitPrices, machines: Sequence[MachineType], accelerators: Sequence[AcceleratorType],
                   now: dt.datetime, notes: list[str]) -> list[Offer]:
    """Price every GPU machine type and every n1 host + attachable GPU combination, per zone."""
    offers: list[Offer] = []
    hosts_by_zone: dict[str, list[MachineType]] = {}
    for machine in machines:
        if gcp_machine_series(machine.name) == N1_HOST_SERIES:
            hosts_by_zone.setdefault(machine.zone, []).append(machine)
            continue
        gpu = gcp_machine_gpu(machine.name)
        if gpu is None or machine.accelerator is None or machine.accelerator_count <= 0:
            continue
        offer = _offer(prices, machine, machine.accelerator, machine.accelerator_count, gpu, now)
        if offer is not None:
            offers.append(offer)
    unpriced: set[str] = set()
    for accel in accelerators:
        if accel.name not in GCP_N1_ACCELERATORS:
            continue
        gpu = GCP_ACCELERATOR_GPU[accel.name]
        hosts = sorted(hosts_by_zone.get(accel.zone, []), key=lambda m: (m.vcpus, m.name))
        for count in (c for c in ATTACH_COUNTS if c <= accel.max_per_vm):
            host = next((h for h in hosts if h.vcpus >= VCPUS_PER_ATTACHED_GPU * count), None)
            if host is None:
                continue
            offer = _offer(prices, host, accel.name, count, gpu, now)
            if offer is None:
                unpriced.add(f"{accel.name}@{region_of(accel.zone)}")
            else:
                offers.append(offer)
    if unpriced:
        notes.append(f"gcp: no price for {len(unpriced)} GPU/region pairs (e.g. {sorted(unpriced)[0]}); left out")
    return offers


def _offer(prices: UnitPrices, machine: MachineType, accelerator: str, count: int, gpu: str,
           now: dt.datetime) -> Offer | None:
    region = region_of(machine.zone)
    series = machine.name.split("-", 1)[0]
    market_prices: list[Decimal | None] = []
    for spot in (False, True):
        core, ram, per_gpu = (prices.get(region, "core", series, spot), prices.get(region, "ram", series, spot),
                              prices.get(region, "gpu", accelerator, spot))
        if core is None or ram is None or per_gpu is None:
            market_prices.append(None)
            continue
        total = core * machine.vcpus + ram * Decimal(str(machine.memory_gib)) + per_gpu * count
        market_prices.append(total.quantize(Decimal("0.000001")))
    if market_prices == [None, None]:
        return None
    return Offer(
        cloud="gcp", region=region, zone=machine.zone, instance_type=machine.name, gpu=gpu, gpu_count=float(count),
        gpu_memory_gb=vendor_gpu_memory_gb(gpu, float(count), GCP_ACCELERATOR_MEMORY_GB.get(accelerator), "GB"),
        vcpus=float(machine.vcpus),
        memory_gb=round(machine.memory_gib, 2), price_per_hour=market_prices[0],
        spot_price_per_hour=market_prices[1], arch="x86_64", source=SOURCE, fetched_at=now,
    )


def _wanted_zone(zone: str, regions: Sequence[str] | None) -> bool:
    return regions is None or region_of(zone) in regions


def _is_gpu_machine(name: str) -> bool:
    series = gcp_machine_series(name)
    return series == N1_HOST_SERIES or gcp_machine_gpu(name) is not None


def fetch_gcp_offers(project: str, regions: Sequence[str] | None, now: dt.datetime) -> GcpFetch:
    """Call the billing catalog and Compute APIs (endpoints/credentials from gcp_clients) and compose offers."""
    from google.cloud import billing_v1, compute_v1

    notes: list[str] = []
    catalog_client = billing_v1.CloudCatalogClient(**client_kwargs(BILLING_OVERRIDE))
    prices = parse_skus(catalog_client.list_skus(parent=COMPUTE_ENGINE_SERVICE))
    if not prices.by_region:
        raise RuntimeError("the Cloud Billing catalog returned no Compute Engine GPU/core/RAM prices")

    machines: list[MachineType] = []
    machine_client = compute_v1.MachineTypesClient(**client_kwargs(COMPUTE_OVERRIDE))
    for scope, scoped in machine_client.aggregated_list(project=project):
        for mt in scoped.machine_types:
            zone = mt.zone or scope.rsplit("/", 1)[-1]
            if not _wanted_zone(zone, regions) or not _is_gpu_machine(mt.name):
                continue
            accel = mt.accelerators[0] if mt.accelerators else None
            machines.append(MachineType(
                zone=zone, name=mt.name, vcpus=int(mt.guest_cpus), memory_gib=mt.memory_mb / 1024,
                accelerator=accel.guest_accelerator_type if accel else None,
                accelerator_count=int(accel.guest_accelerator_count) if accel else 0,
            ))

    accelerators: list[AcceleratorType] = []
    accel_client = compute_v1.AcceleratorTypesClient(**client_kwargs(COMPUTE_OVERRIDE))
    for scope, scoped in accel_client.aggregated_list(project=project):
        for at in scoped.accelerator_types:
            zone = at.zone.rsplit("/", 1)[-1] if at.zone else scope.rsplit("/", 1)[-1]
            if _wanted_zone(zone, regions):
                accelerators.append(AcceleratorType(zone=zone, name=at.name,
                                                    max_per_vm=int(at.maximum_cards_per_instance)))

    offers = compose_offers(prices, machines, accelerators, now, notes)
    return GcpFetch(offers=offers, regions=sorted({o.region for o in offers}), notes=notes)
