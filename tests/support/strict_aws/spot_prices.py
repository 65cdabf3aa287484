"""Rule 10: DescribeSpotPriceHistory answers from a history the test seeds, as EC2 documents it.

moto does not model spot prices: it invents one row per type and zone (about $0.00001/h, dated years back), so a spot
run settled against plain moto is billed at about nothing and a test that settles one proves nothing about the bill.
The layer answers the action itself from `layer.seed_spot_history(...)`, with the documented semantics
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html):

- "When you specify a start and end time, the operation returns the prices of the instance types within that time
  range. It also returns the last price change before the start time, which is the effective price as of the start
  time." Rows come newest first.
- StartTime older than 90 days is refused: "You can view the Spot Instance price history for the last 90 days"
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-instances-history.html); the error is
  InvalidParameterValue (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
- MaxResults is 5..1000; more rows than that are paged with NextToken.
- A type/zone nobody seeded has no history: the answer is empty (the caller must not invent a price either).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from .wire import QueryRequest, Reply, XmlNode, ec2_error, ec2_response

UTC = dt.timezone.utc
HISTORY_DAYS = 90
PAGE_LIMITS = (5, 1000)


@dataclass(frozen=True)
class SpotPriceRow:
    """One price change: `price` USD per hour from `at` until the next change of the same zone, type and product."""

    zone: str
    instance_type: str
    at: dt.datetime
    price: Decimal
    product: str = "Linux/UNIX"

    def xml(self) -> XmlNode:
        return XmlNode({"availabilityZone": self.zone, "instanceType": self.instance_type,
                        "productDescription": self.product, "spotPrice": f"{self.price:.6f}",
                        "timestamp": self.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")})


def _when(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def describe_spot_price_history(req: QueryRequest, rows: list[SpotPriceRow],
                                 now: dt.datetime | None = None) -> Reply:
    """The documented answer from the seeded `rows` of the request's region."""
    now = now or dt.datetime.now(UTC)
    start, end = _when(req.params.get("StartTime")), _when(req.params.get("EndTime"))
    if start is not None and start < now - dt.timedelta(days=HISTORY_DAYS):
        return ec2_error("InvalidParameterValue", "The start time must be within the last 90 days.")
    limit = int(req.params.get("MaxResults", PAGE_LIMITS[1]))
    if not PAGE_LIMITS[0] <= limit <= PAGE_LIMITS[1]:
        return ec2_error("InvalidParameterValue", f"Value ( {limit} ) for parameter maxResults is invalid. "
                         "Expecting a value between 5 and 1000.")
    types, products = set(req.indexed("InstanceType")), set(req.indexed("ProductDescription"))
    zone = req.params.get("AvailabilityZone")
    wanted = [r for r in rows if (not types or r.instance_type in types) and (not products or r.product in products)
              and (not zone or r.zone == zone)]
    start, end = start or now, end or now
    chosen: list[SpotPriceRow] = []
    for key in {(r.zone, r.instance_type, r.product) for r in wanted}:
        series = sorted((r for r in wanted if (r.zone, r.instance_type, r.product) == key), key=lambda r: r.at)
        before = [r for r in series if r.at <= start]
        chosen += before[-1:] + [r for r in series if start < r.at <= end]
    chosen.sort(key=lambda r: r.at, reverse=True)
    offset = int(req.params.get("NextToken") or 0)
    page = chosen[offset:offset + limit]
    token = str(offset + limit) if offset + limit < len(chosen) else ""
    return ec2_response("DescribeSpotPriceHistory", spotPriceHistorySet=[r.xml() for r in page], nextToken=token)
