"""AWS on-demand GPU prices without an AWS account: the Price List Bulk API's public files.

The files need no credentials (https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/
using-the-aws-price-list-bulk-api-fetching-price-list-files-manually.html): the region index
`/offers/v1.0/aws/AmazonEC2/current/region_index.json` names each region's current file (`currentVersionUrl`,
.../index.json; the same path ending in index.csv is its CSV form: https://docs.aws.amazon.com/awsaccountbilling/
latest/aboutv2/bulk-api-reading-price-list-files.html). A region's CSV starts with 5 metadata rows (FormatVersion,
Disclaimer, Publication Date, Version, OfferCode), then a header row; it is hundreds of MB, so it is streamed and
only the rows of GPU families are parsed. The on-demand price of a type is the row with TermType OnDemand, Unit
Hrs, Linux, Shared tenancy, no pre-installed software, CapacityStatus Used, MarketOption OnDemand and operation
RunInstances — the filters the Pricing API path uses (gpuplan.catalog.refresh_aws).

What needs an account: the zones a type is offered in (EC2 DescribeInstanceTypeOfferings) and spot prices (EC2
DescribeSpotPriceHistory; AWS documents no public spot price file). Both are taken from the previous snapshot
(a stored refresh or the shipped one) for the same region and type, and the snapshot's source says so.

The endpoint is https://pricing.us-east-1.amazonaws.com unless GPUPLAN_AWS_PRICE_LIST_URL names another (a
mirror, or the recorded files the tests serve on 127.0.0.1).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import re
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import IO

from gpuplan.catalog.gpu_memory import vendor_gpu_memory_gb
from gpuplan.catalog.gpu_names import AWS_FAMILY_GPU, aws_instance_gpu
from gpuplan.catalog.offer import Offer

DEFAULT_URL = "https://pricing.us-east-1.amazonaws.com"
REGION_INDEX = "/offers/v1.0/aws/AmazonEC2/current/region_index.json"
ENDPOINT_VARIABLE = "GPUPLAN_AWS_PRICE_LIST_URL"
SOURCE = "aws: public Price List Bulk API (on-demand)"
METADATA_ROWS = 5
TIMEOUT_S = 60
WANTED = {"TermType": "OnDemand", "Unit": "Hrs", "Operating System": "Linux", "Tenancy": "Shared",
          "Pre Installed S/W": "NA", "CapacityStatus": "Used", "MarketOption": "OnDemand",
          "operation": "RunInstances", "Currency": "USD"}
_NUMBER = re.compile(r"[\d.]+")

Opener = Callable[[str], IO[bytes]]


def endpoint() -> str:
    return (os.environ.get(ENDPOINT_VARIABLE) or DEFAULT_URL).rstrip("/")


def _open(url: str) -> IO[bytes]:
    return urllib.request.urlopen(url, timeout=TIMEOUT_S)


@dataclass
class PublicFetch:
    offers: list[Offer]
    regions: list[str]
    notes: list[str] = field(default_factory=list)
    carried_from: str | None = None  # the snapshot the zones and spot prices come from


def region_files(base: str, opener: Opener, regions: Sequence[str] | None) -> dict[str, str]:
    """Region -> the URL of its current CSV price list (only `regions`, when given)."""
    with opener(base + REGION_INDEX) as fh:
        index = json.load(fh)
    out: dict[str, str] = {}
    for code, entry in (index.get("regions") or {}).items():
        if regions and code not in regions:
            continue
        path = str(entry.get("currentVersionUrl") or "")
        if path.endswith("/index.json"):
            out[code] = base + path[: -len("index.json")] + "index.csv"
    return out


def gpu_rows(stream: Iterable[str]) -> Iterable[dict[str, str]]:
    """The CSV's on-demand rows of GPU families (other lines are skipped before any CSV parsing)."""
    lines = iter(stream)
    for _ in range(METADATA_ROWS):
        next(lines, None)
    header_line = next(lines, None)
    if header_line is None:
        return
    header = next(csv.reader([header_line]))
    families = tuple(f'"{family}.' for family in AWS_FAMILY_GPU)
    for line in lines:
        if not any(f in line for f in families) or '"OnDemand"' not in line:
            continue
        row = dict(zip(header, next(csv.reader([line])), strict=False))
        if all(row.get(key, value) == value for key, value in WANTED.items()):
            yield row


def _number(text: str | None) -> float | None:
    match = _NUMBER.search(text or "")
    return float(match.group()) if match else None


def fetch_public_offers(regions: Sequence[str] | None, now: dt.datetime, previous: Sequence[Offer],
                        previous_source: str, opener: Opener = _open,
                        progress: Callable[[str], None] | None = None) -> PublicFetch:
    """Every GPU offer's on-demand price from the public files; zones, spot prices and arch from `previous`."""
    base = endpoint()
    files = region_files(base, opener, regions)
    if regions:
        missing = sorted(set(regions) - set(files))
        if missing:
            raise ValueError(f"no public EC2 price list for region(s) {', '.join(missing)}")
    elif previous:  # the regions gpuplan already knows: every region's file is hundreds of MB
        known = {o.region for o in previous}
        files = {r: u for r, u in files.items() if r in known}
    before: dict[tuple[str, str], list[Offer]] = {}
    for offer in previous:
        before.setdefault((offer.region, offer.instance_type), []).append(offer)
    offers: list[Offer] = []
    unzoned = 0
    for region, url in sorted(files.items()):
        prices: dict[str, tuple[Decimal, dict[str, str]]] = {}
        with opener(url) as raw:
            for row in gpu_rows(io.TextIOWrapper(raw, encoding="utf-8", newline="")):
                instance_type = row.get("Instance Type", "")
                if row.get("Region Code", region) != region or aws_instance_gpu(instance_type) is None:
                    continue
                try:
                    price = Decimal(row.get("PricePerUnit", "")).normalize()
                except InvalidOperation:
                    continue
                if price > 0 and (instance_type not in prices or price < prices[instance_type][0]):
                    prices[instance_type] = (price, row)
        for instance_type, (price, row) in sorted(prices.items()):
            gpu = aws_instance_gpu(instance_type)
            assert gpu is not None
            earlier = before.get((region, instance_type), [])
            count = _number(row.get("GPU")) or (earlier[0].gpu_count if earlier else 1.0)
            memory = vendor_gpu_memory_gb(gpu, count, _number(row.get("GPU Memory")), "GiB")
            base_offer = Offer(cloud="aws", region=region, zone=None, instance_type=instance_type, gpu=gpu,
                               gpu_count=count, gpu_memory_gb=memory, vcpus=_number(row.get("vCPU")),
                               memory_gb=_number(row.get("Memory")), price_per_hour=price,
                               spot_price_per_hour=None, arch=None, source=SOURCE, fetched_at=now)
            if not earlier:
                unzoned += 1
                arm = re.match(r"^[a-z]+\d+[a-z]*g\.", instance_type) is not None  # g5g: Graviton
                offers.append(replace(base_offer, arch="arm64" if arm else "x86_64"))
                continue
            offers += [replace(base_offer, zone=o.zone, spot_price_per_hour=o.spot_price_per_hour, arch=o.arch)
                       for o in earlier]
        if progress is not None:
            progress(f"aws {region}: {len(prices)} GPU instance types priced")
    notes = [f"aws: zones and spot prices need an AWS account (EC2 DescribeInstanceTypeOfferings, "
             f"DescribeSpotPriceHistory); kept from {previous_source}"]
    if unzoned:
        notes.append(f"aws: {unzoned} type(s) new since that snapshot have no zones or spot price yet")
    return PublicFetch(offers, sorted(files), notes, previous_source)
