"""Live AWS GPU prices: the Pricing API for on-demand, EC2 for spot, zones and GPU specs.

- `pricing.get_products` (AmazonEC2; GPU instance family; Linux, shared tenancy, no pre-installed software,
  capacity "Used", on-demand terms) gives the on-demand price per (instance type, region). The API lives in
  us-east-1; its PriceList entries are JSON *strings*.
- per region, `ec2.describe_instance_type_offerings` (by AZ id) says in which zones a type exists,
  `describe_spot_price_history` (Linux/UNIX, StartTime=now) gives the current spot price per zone (zone names,
  mapped to zone ids with `describe_availability_zones`, since the snapshot and the offers use zone ids; asked with
  AllAvailabilityZones=True, without which EC2 lists only the Local and Wavelength Zones this account opted in to:
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeAvailabilityZones.html; each zone keeps its
  own spot price, and its ZoneType must agree with the type gpuplan.catalog.zones derives from the id), and
  `describe_instance_types` gives GpuInfo (GPU name, count, memory), vCPUs, memory and architecture.

boto3 is imported only here (by the client factory); botocore honours AWS_ENDPOINT_URL itself.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gpuplan.catalog.gpu_memory import vendor_gpu_memory_gb
from gpuplan.catalog.gpu_names import aws_gpuinfo_gpu, aws_instance_gpu
from gpuplan.catalog.offer import Offer
from gpuplan.catalog.zones import aws_zone_type

PRICING_REGION = "us-east-1"
SOURCE = "aws: pricing.get_products + ec2 spot history/instance types"
BASE_FILTERS: tuple[tuple[str, str], ...] = (
    ("instanceFamily", "GPU instance"),
    ("operatingSystem", "Linux"),
    ("tenancy", "Shared"),
    ("preInstalledSw", "NA"),
    ("capacitystatus", "Used"),
)
DESCRIBE_TYPES_CHUNK = 100  # the API's limit of InstanceTypes per call

ClientFactory = Callable[[str, str], Any]  # (service, region) -> boto3 client


@dataclass
class FetchResult:
    """Offers of one refresh plus human notes (skipped types etc.) for stderr."""

    offers: list[Offer]
    regions: list[str]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TypeSpec:
    gpu: str
    gpu_count: float
    gpu_memory_gb: float | None
    vcpus: float | None
    memory_gb: float | None
    arch: str | None


def fetch_aws_offers(factory: ClientFactory, regions: Sequence[str] | None, now: dt.datetime) -> FetchResult:
    """Every GPU offer AWS prices (in `regions`, or everywhere the Pricing API lists one)."""
    notes: list[str] = []
    on_demand = on_demand_prices(factory("pricing", PRICING_REGION), regions, notes)
    by_region: dict[str, dict[str, Decimal]] = {}
    for (instance_type, region), price in on_demand.items():
        by_region.setdefault(region, {})[instance_type] = price
    specs: dict[str, TypeSpec | None] = {}
    offers: list[Offer] = []
    for region in sorted(by_region):
        ec2 = factory("ec2", region)
        prices = by_region[region]
        types = sorted(prices)
        zones = _zones_by_type(ec2, types)
        # Only types offered in the region: describing one EC2 does not know there fails the whole call.
        _describe_types(ec2, [t for t in types if t in zones and t not in specs], specs, notes)
        spot = _spot_prices(ec2, types, now, notes)
        for instance_type in types:
            spec = specs.get(instance_type)
            if spec is None:
                continue
            for zone in sorted(zones.get(instance_type, ())):
                offers.append(Offer(
                    cloud="aws", region=region, zone=zone, instance_type=instance_type, gpu=spec.gpu,
                    gpu_count=spec.gpu_count, gpu_memory_gb=spec.gpu_memory_gb, vcpus=spec.vcpus,
                    memory_gb=spec.memory_gb, price_per_hour=prices[instance_type],
                    spot_price_per_hour=spot.get((instance_type, zone)), arch=spec.arch, source=SOURCE,
                    fetched_at=now,
                ))
    return FetchResult(offers=offers, regions=sorted(by_region), notes=notes)


def on_demand_prices(pricing: Any, regions: Sequence[str] | None,
                     notes: list[str]) -> dict[tuple[str, str], Decimal]:
    """(instance type, region) -> on-demand USD/hour for the GPU families gpuplan plans for."""
    out: dict[tuple[str, str], Decimal] = {}
    skipped: set[str] = set()
    wanted: Sequence[str | None] = regions or [None]  # None: every region in one query
    for region in wanted:
        filters = [{"Type": "TERM_MATCH", "Field": name, "Value": value} for name, value in BASE_FILTERS]
        if region is not None:
            filters.append({"Type": "TERM_MATCH", "Field": "regionCode", "Value": region})
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"ServiceCode": "AmazonEC2", "Filters": filters, "FormatVersion": "aws_v1",
                                      "MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            page = pricing.get_products(**kwargs)
            for item in page.get("PriceList", []):
                parsed = parse_price_item(item)
                if parsed is None:
                    continue
                instance_type, item_region, price = parsed
                if aws_instance_gpu(instance_type) is None:
                    skipped.add(instance_type.split(".")[0])
                    continue
                key = (instance_type, item_region)
                out[key] = min(price, out.get(key, price))
            token = page.get("NextToken")
            if not token:
                break
    if skipped:
        notes.append(f"aws: skipped GPU families gpuplan does not plan for: {', '.join(sorted(skipped))}")
    return out


def parse_price_item(item: str | dict[str, Any]) -> tuple[str, str, Decimal] | None:
    """One PriceList entry (a JSON string) -> (instance type, region, on-demand USD/hour), None if not usable."""
    doc = json.loads(item) if isinstance(item, str) else item
    attrs = doc.get("product", {}).get("attributes", {})
    instance_type, region = attrs.get("instanceType"), attrs.get("regionCode")
    if not instance_type or not region:
        return None
    if attrs.get("marketoption", "OnDemand") != "OnDemand":
        return None  # capacity blocks and other markets are not on-demand prices
    if attrs.get("operation", "RunInstances") != "RunInstances":
        return None  # RunInstances:xxxx are OS/licence variants
    for term in doc.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if dimension.get("unit") == "Hrs" and usd and Decimal(usd) > 0:
                return instance_type, region, Decimal(usd).normalize()
    return None


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _describe_types(ec2: Any, types: Sequence[str], specs: dict[str, TypeSpec | None], notes: list[str]) -> None:
    for chunk in _chunks(list(types), DESCRIBE_TYPES_CHUNK):
        for info in _paginate(ec2, "describe_instance_types", "InstanceTypes", InstanceTypes=list(chunk)):
            specs[info["InstanceType"]] = type_spec(info)
            if specs[info["InstanceType"]] is None:
                notes.append(f"aws: {info['InstanceType']}: no GpuInfo gpuplan understands; skipped")


def type_spec(info: dict[str, Any]) -> TypeSpec | None:
    """describe_instance_types entry -> specs; the family mapping names the GPU, GpuInfo is the fallback."""
    gpus = info.get("GpuInfo", {}).get("Gpus") or []
    if not gpus:
        return None
    first = gpus[0]
    memory_mib = first.get("MemoryInfo", {}).get("SizeInMiB")
    gpu = aws_instance_gpu(info["InstanceType"]) or aws_gpuinfo_gpu(first.get("Name", ""), memory_mib)
    if gpu is None:
        return None
    count = float(sum(g.get("Count", 0) for g in gpus))
    if count == 0:  # a GPU slice (g6f): Count 0, LogicalGpuCount 1, GpuPartitionSize 0.25
        count = float(first.get("LogicalGpuCount", 1)) * float(first.get("GpuPartitionSize", 1.0))
    archs = info.get("ProcessorInfo", {}).get("SupportedArchitectures") or []
    return TypeSpec(
        gpu=gpu,
        gpu_count=count,
        gpu_memory_gb=vendor_gpu_memory_gb(gpu, count, memory_mib, "MiB"),
        vcpus=float(info.get("VCpuInfo", {}).get("DefaultVCpus", 0)) or None,
        memory_gb=round(info.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024, 2) or None,
        arch="arm64" if "arm64" in archs else (archs[0] if archs else None),
    )


def _zones_by_type(ec2: Any, types: Sequence[str]) -> dict[str, set[str]]:
    zones: dict[str, set[str]] = {}
    for chunk in _chunks(list(types), 200):
        for row in _paginate(ec2, "describe_instance_type_offerings", "InstanceTypeOfferings",
                             LocationType="availability-zone-id",
                             Filters=[{"Name": "instance-type", "Values": list(chunk)}]):
            zones.setdefault(row["InstanceType"], set()).add(row["Location"])
    return zones


def zone_ids(ec2: Any, notes: list[str]) -> dict[str, str]:
    """Zone name -> zone id of every zone of the client's region, Local and Wavelength Zones included; a zone whose
    ZoneType disagrees with the type derived from its id is noted (the catalog's rule would then be wrong)."""
    out: dict[str, str] = {}
    for zone in ec2.describe_availability_zones(AllAvailabilityZones=True)["AvailabilityZones"]:
        out[zone["ZoneName"]] = zone["ZoneId"]
        reported = zone.get("ZoneType")
        if reported and reported != aws_zone_type(zone["ZoneId"]):
            notes.append(f"aws: {zone['ZoneId']} is a {reported} but its id reads as a {aws_zone_type(zone['ZoneId'])}")
    return out


def _spot_prices(ec2: Any, types: Sequence[str], now: dt.datetime,
                 notes: list[str]) -> dict[tuple[str, str], Decimal]:
    """(instance type, zone id) -> the newest Linux spot price (StartTime=now returns the current price)."""
    ids = zone_ids(ec2, notes)
    newest: dict[tuple[str, str], tuple[Any, Decimal]] = {}
    for row in _paginate(ec2, "describe_spot_price_history", "SpotPriceHistory", InstanceTypes=list(types),
                         ProductDescriptions=["Linux/UNIX"], StartTime=now):
        zone_id = ids.get(row["AvailabilityZone"])
        if zone_id is None:
            continue
        key = (row["InstanceType"], zone_id)
        stamp = row.get("Timestamp")
        if key not in newest or (stamp is not None and stamp > newest[key][0]):
            newest[key] = (stamp, Decimal(row["SpotPrice"]).normalize())
    return {key: price for key, (_, price) in newest.items() if price > 0}


def _paginate(client: Any, operation: str, result_key: str, **kwargs: Any) -> Iterable[dict[str, Any]]:
    for page in client.get_paginator(operation).paginate(**kwargs):
        yield from page.get(result_key, [])
