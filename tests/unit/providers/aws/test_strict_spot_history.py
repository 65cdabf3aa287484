"""Rule 10 of the strict AWS layer: DescribeSpotPriceHistory as documented, against moto's invented prices.

Spot-as-billed (gpuplan.supervise.spot_bill) bills a spot machine at the integral of its zone's price history; on
plain moto that history is made up, so each case here shows moto's answer first and then the layer's.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from gpuplan.providers.aws.spot_history import spot_price_history
from gpuplan.runs.spot_billing import integrate

from support.strict_aws.asserts import refusal
from support.strict_aws.fixture import StrictAwsServer

UTC = dt.timezone.utc
NOW = dt.datetime.now(UTC).replace(microsecond=0)
START, END = NOW - dt.timedelta(days=2), NOW - dt.timedelta(days=2) + dt.timedelta(hours=3)


def at(hours: float) -> dt.datetime:
    return START + dt.timedelta(hours=hours)


def seed(strict_aws: StrictAwsServer) -> None:
    # $18 since before the start, $20 from +1 h, $16 from +2 h, $30 after the end; another zone and type beside.
    strict_aws.layer.seed_spot_history("us-east-1", "us-east-1a", "p5.48xlarge", [
        (at(-6), Decimal(12)), (at(-5), Decimal(18)), (at(1), Decimal(20)), (at(2), Decimal(16)),
        (at(4), Decimal(30))])
    strict_aws.layer.seed_spot_history("us-east-1", "us-east-1b", "p5.48xlarge", [(at(-1), Decimal(50))])
    strict_aws.layer.seed_spot_history("us-east-1", "us-east-1a", "g5.xlarge", [(at(-1), Decimal(1))])


def test_moto_invents_a_price_the_layer_does_not(strict_aws: StrictAwsServer) -> None:
    ask = {"InstanceTypes": ["p5.48xlarge"], "ProductDescriptions": ["Linux/UNIX"], "AvailabilityZone": "us-east-1a",
           "StartTime": START, "EndTime": END}
    invented = strict_aws.moto_client("ec2").describe_spot_price_history(**ask)["SpotPriceHistory"]
    assert invented and all(Decimal(r["SpotPrice"]) < Decimal("0.01") for r in invented)  # the evidence
    assert strict_aws.client("ec2").describe_spot_price_history(**ask)["SpotPriceHistory"] == []  # nobody seeded


def test_history_is_the_price_in_effect_at_start_then_the_changes_newest_first(strict_aws: StrictAwsServer) -> None:
    seed(strict_aws)
    rows = strict_aws.client("ec2").describe_spot_price_history(
        InstanceTypes=["p5.48xlarge"], ProductDescriptions=["Linux/UNIX"], AvailabilityZone="us-east-1a",
        StartTime=START, EndTime=END)["SpotPriceHistory"]
    assert [(r["Timestamp"], r["SpotPrice"]) for r in rows] == [
        (at(2), "16.000000"), (at(1), "20.000000"), (at(-5), "18.000000")]
    assert {(r["AvailabilityZone"], r["InstanceType"]) for r in rows} == {("us-east-1a", "p5.48xlarge")}


def test_pages_follow_next_token_and_the_bill_is_the_integral(strict_aws: StrictAwsServer) -> None:
    seed(strict_aws)
    ec2 = strict_aws.client("ec2")
    # Eight more changes (to the same $16) in the last hour: eleven rows, three pages of at most 5.
    strict_aws.layer.seed_spot_history("us-east-1", "us-east-1a", "p5.48xlarge",
                                       [(at(2 + k / 10), Decimal(16)) for k in range(1, 9)])
    pages = list(ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=["p5.48xlarge"], AvailabilityZone="us-east-1a", StartTime=START, EndTime=END,
        PaginationConfig={"PageSize": 5}))
    assert len(pages) == 3 and all(len(p["SpotPriceHistory"]) <= 5 for p in pages)
    points = spot_price_history(ec2, "us-east-1a", "p5.48xlarge", START, END)
    assert points[0].at == at(-5) and len(points) == 11
    bill = integrate(points, START, END)
    assert bill is not None
    assert bill.cost == Decimal(18 + 20 + 16)  # an hour at each price


def test_start_older_than_90_days_is_refused(strict_aws: StrictAwsServer) -> None:
    old = NOW - dt.timedelta(days=91)
    assert strict_aws.moto_client("ec2").describe_spot_price_history(StartTime=old)  # moto answers
    code, status = refusal(lambda: strict_aws.client("ec2").describe_spot_price_history(StartTime=old))[:2]
    assert (code, status) == ("InvalidParameterValue", 400)
    assert refusal(lambda: strict_aws.client("ec2").describe_spot_price_history(MaxResults=2))[:2] == \
        ("InvalidParameterValue", 400)
