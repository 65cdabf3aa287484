"""A spot price history scripted as DescribeSpotPriceHistory documents it, and a spot run to bill against it.

Shared by the spot-as-billed tests (tests/unit/supervise/test_spot_bill.py) and the report's (test_report_quoted.py).
AWS's answer comes through botocore's Stubber: the last change before StartTime, then the changes in the range,
over two pages, newest first (moto generates its history and cannot be seeded with one).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import boto3
from botocore.stub import Stubber

from gpuplan.providers.aws.spot_history import spot_price_history
from gpuplan.providers.base import SpotPricePoint
from gpuplan.store.db import Store
from gpuplan.store.models import InstanceRow, Run

UTC = dt.timezone.utc
# A week ago, on the hour: inside the 90 days DescribeSpotPriceHistory keeps, whenever the suite runs.
START = (dt.datetime.now(UTC) - dt.timedelta(days=7)).replace(minute=0, second=0, microsecond=0)
END = START + dt.timedelta(hours=3.5)


def t(hours: float) -> dt.datetime:
    return START + dt.timedelta(hours=hours)


# $18/h since before the start, $20 from 11:00, $16 from 12:30, $30 from 14:00 (after the end).
HISTORY = [SpotPricePoint(t(-5), Decimal("18")), SpotPricePoint(t(1), Decimal("20")),
           SpotPricePoint(t(2.5), Decimal("16")), SpotPricePoint(t(4), Decimal("30"))]
# 1 h x 18 + 1.5 h x 20 + 1 h x 16 = 64; quoted at launch 17.6289 x 3.5 h = 61.70115
INTEGRAL = Decimal("64")


def _page(rows: list[tuple[dt.datetime, str]], token: str | None = None) -> dict[str, Any]:
    page: dict[str, Any] = {"SpotPriceHistory": [
        {"AvailabilityZone": "us-east-1a", "InstanceType": "p5.48xlarge", "ProductDescription": "Linux/UNIX",
         "SpotPrice": price, "Timestamp": at} for at, price in rows]}
    if token:
        page["NextToken"] = token
    return page


def stubbed_ec2() -> tuple[Any, Stubber]:
    """The documented answer in two pages, newest first as EC2 returns it."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stubber = Stubber(ec2)
    params = {"InstanceTypes": ["p5.48xlarge"], "ProductDescriptions": ["Linux/UNIX"],
              "AvailabilityZone": "us-east-1a", "StartTime": START, "EndTime": END}
    stubber.add_response("describe_spot_price_history", _page([(t(2.5), "16.000000"), (t(1), "20.000000")], "p2"),
                         params)
    stubber.add_response("describe_spot_price_history", _page([(t(-5), "18.000000")]),
                         {**params, "NextToken": "p2"})
    return ec2, stubber


class HistoryProvider:
    """The provider contract's spot_price_history, answered from a stubbed EC2 client."""

    spot_priced_by_catalog = False

    def __init__(self) -> None:
        self.ec2, self.stubber = stubbed_ec2()

    def spot_price_source(self) -> str:
        return "aws: DescribeSpotPriceHistory"  # as AwsProvider names it

    def spot_price_history(self, region: str, zone: str | None, instance_type: str, start: dt.datetime,
                           end: dt.datetime) -> list[SpotPricePoint]:
        assert (region, zone, instance_type) == ("us-east-1", "us-east-1a", "p5.48xlarge")
        with self.stubber:
            return spot_price_history(self.ec2, zone, instance_type, start, end)


def seed(store: Store, *, cloud: str = "aws", spot: bool = True, price: str = "17.6289",
         itype: str = "p5.48xlarge", region: str = "us-east-1", zone: str = "us-east-1a", gpu: str = "H100",
         count: float = 8) -> None:
    with store.session() as s:
        run = Run(id="r-sp0t", name="spot", provider=cloud, spec_text="", spec_hash="", cloud=cloud, spot=spot,
                  state="succeeded", started_at=START, ended_at=END)
        s.add(run)
        s.flush()
        s.add(InstanceRow(run_id=run.id, provider=cloud, provider_instance_id="i-1", cloud=cloud, region=region,
                          zone=zone, instance_type=itype, gpu=gpu, gpu_count=count, spot=spot,
                          price_per_hour=Decimal(price), min_billed_seconds=60, launched_at=START,
                          terminated_at=END, state="terminated"))


def settle_run(store: Store, provider: Any, run_id: str = "r-sp0t") -> None:
    """Settle the seeded run with `provider` (its history) in one session, as `watch` or `stop` would."""
    from gpuplan.supervise.settle import settle

    with store.session() as s:
        run = s.get(Run, run_id)
        assert run is not None
        settle(s, run, provider)
