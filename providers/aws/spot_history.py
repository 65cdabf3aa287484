"""The spot price an AWS machine was charged over its life: DescribeSpotPriceHistory for its zone and type.

The documented contract (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html):
"When you specify a start and end time, the operation returns the prices of the instance types within that time
range. It also returns the last price change before the start time, which is the effective price as of the start
time." StartTime may go back at most 90 days. Results are paginated (NextToken; botocore's paginator follows it),
and each row names its AvailabilityZone, InstanceType, ProductDescription, SpotPrice (a string, USD per hour) and
Timestamp. gpuplan launches Linux machines, so the product is `Linux/UNIX`; the zone is the machine's zone NAME
(what the instance row records), sent as `AvailabilityZone`.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import Any

from gpuplan.providers.base import SpotPricePoint

PRODUCT = "Linux/UNIX"
HISTORY_DAYS = 90  # how far back StartTime may go


def spot_price_history(ec2: Any, zone: str, instance_type: str, start: dt.datetime,
                       end: dt.datetime) -> list[SpotPricePoint]:
    """Every price change of `instance_type` in `zone` over [start, end] plus the one in effect at `start`, oldest
    first (rows of other zones, types or products, which the filters should already exclude, are dropped).

    A start more than 90 days back is asked from 90 days back (what the API keeps); the billing then uses the
    oldest known price for the time before it and says so (gpuplan.runs.spot_billing: `history_starts_late`)."""
    oldest = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=HISTORY_DAYS) + dt.timedelta(hours=1)
    start = max(start, oldest)
    end = max(end, start)
    points: dict[dt.datetime, Decimal] = {}
    paginator = ec2.get_paginator("describe_spot_price_history")
    for page in paginator.paginate(InstanceTypes=[instance_type], ProductDescriptions=[PRODUCT],
                                   AvailabilityZone=zone, StartTime=start, EndTime=end):
        for row in page.get("SpotPriceHistory", []):
            if row.get("AvailabilityZone") not in (None, zone) or row.get("InstanceType") != instance_type:
                continue
            if row.get("ProductDescription") not in (None, PRODUCT):
                continue
            try:
                price = Decimal(str(row["SpotPrice"]))
            except (KeyError, InvalidOperation):
                continue
            stamp = row["Timestamp"]
            points[stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)] = price
    return [SpotPricePoint(at, price) for at, price in sorted(points.items())]
