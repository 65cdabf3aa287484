"""AWS price refresh: the Pricing API through botocore's Stubber (moto lacks it), EC2 through moto."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from gpuplan.catalog import Catalog
from gpuplan.catalog.refresh import RefreshError, refresh
from gpuplan.catalog.refresh_aws import parse_price_item
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.store.db import Store

from support.clihelp import run_cli

REGIONS = ("us-east-1", "us-west-2")


def price_item(instance_type: str, region: str, usd: str, **extra: str) -> str:
    """One PriceList entry as the Pricing API returns it: a JSON *string* (shape recorded from get_products)."""
    attributes = {
        "instanceType": instance_type, "regionCode": region, "location": "US East (N. Virginia)",
        "locationType": "AWS Region", "instanceFamily": "GPU instance", "operatingSystem": "Linux",
        "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required",
        "operation": "RunInstances", "usagetype": f"BoxUsage:{instance_type}", "vcpu": "96", "memory": "1152 GiB",
        "gpu": "8", "servicecode": "AmazonEC2", "servicename": "Amazon Elastic Compute Cloud",
        "marketoption": "OnDemand", "currentGeneration": "Yes", **extra,
    }
    sku = f"SKU{abs(hash((instance_type, region, usd))) % 10**8:08d}"
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "attributes": attributes, "sku": sku},
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {f"{sku}.JRTCKXETXF": {
                "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                    "unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": [],
                    "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                    "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7", "pricePerUnit": {"USD": f"{usd}0000000"},
                }},
                "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "offerTermCode": "JRTCKXETXF",
                "termAttributes": {},
            }},
            "Reserved": {f"{sku}.4NA7Y494T4": {"priceDimensions": {}, "sku": sku, "offerTermCode": "4NA7Y494T4",
                                               "effectiveDate": "2026-11-01T00:00:00Z",
                                               "termAttributes": {"LeaseContractLength": "1yr"}}},
        },
        "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
    })


PAGE_1 = [
    price_item("p4d.24xlarge", "us-east-1", "21.957642"),
    price_item("p5.48xlarge", "us-east-1", "55.04"),
    price_item("g5.xlarge", "us-east-1", "1.006"),
    price_item("g4ad.xlarge", "us-east-1", "0.37853"),  # AMD Radeon: not a GPU gpuplan plans for
    price_item("p5.48xlarge", "us-east-1", "31.464", marketoption="CapacityBlock"),  # not on-demand
]
PAGE_2 = [
    price_item("g6f.2xlarge", "us-east-1", "0.6"),
    price_item("g5.xlarge", "us-west-2", "1.006"),
    price_item("p4d.24xlarge", "us-west-2", "21.957642"),
    price_item("g5.xlarge", "us-west-2", "9.99", operation="RunInstances:0010"),  # RHEL: another OS
]


def expected_request(token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"ServiceCode": "AmazonEC2", "Filters": ANY, "FormatVersion": "aws_v1",
                              "MaxResults": 100}
    if token:
        params["NextToken"] = token
    return params


def aws_prices(factory: Any) -> AwsProvider:
    """The AWS provider, its clients from `factory` (moto in-process, the stubbed pricing client)."""

    class StubbedClients(AwsProvider):
        def client(self, service: str, region: str, *, retries: int | None = None) -> Any:
            return factory(service, region)

    return StubbedClients()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """moto for EC2 in-process, a stubbed pricing client, and the client factory the refresh uses."""
    monkeypatch.delenv("AWS_ENDPOINT_URL")  # moto intercepts the standard endpoints in-process
    monkeypatch.setenv("MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION", "true")
    with mock_aws():
        pricing = boto3.client("pricing", region_name="us-east-1")
        stubber = Stubber(pricing)
        clients: dict[tuple[str, str], Any] = {}

        def factory(service: str, region: str) -> Any:
            if service == "pricing":
                return pricing
            return clients.setdefault((service, region), boto3.client(service, region_name=region))

        with stubber:
            yield {"stubber": stubber, "factory": factory}


def test_parse_price_item_reads_the_on_demand_hourly_usd() -> None:
    assert parse_price_item(PAGE_1[1]) == ("p5.48xlarge", "us-east-1", Decimal("55.04"))
    assert parse_price_item(PAGE_1[4]) is None  # capacity block
    assert parse_price_item(PAGE_2[3]) is None  # another operating system


def test_refresh_stores_offers_with_zones_spot_and_gpu_info(aws: dict[str, Any], tmp_path) -> None:
    stubber: Stubber = aws["stubber"]
    stubber.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": PAGE_1, "NextToken": "page2"},
                         expected_request())
    stubber.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": PAGE_2}, expected_request("page2"))
    url = f"sqlite:///{tmp_path / 'aws.db'}"
    store = Store.open(url)
    try:
        report = refresh(store, aws_prices(aws["factory"]), None)
    finally:
        store.close()
    stubber.assert_no_pending_responses()
    assert report.regions == list(REGIONS)
    assert report.gpus == ["A100-40GB", "A10G", "H100", "L4"]
    assert any("g4ad" in note for note in report.notes)

    catalog = Catalog.load(url, {"aws"})
    assert catalog.sources["aws"].snapshot_id == report.snapshot_id
    offers = catalog.offers
    assert len(offers) == report.offer_count
    p5 = [o for o in offers if o.instance_type == "p5.48xlarge"]
    assert p5 and {o.region for o in p5} == {"us-east-1"}
    assert all(o.zone.startswith("use1-az") for o in p5)  # AZ ids, as in the shipped snapshot
    assert {(o.gpu, o.gpu_count, o.gpu_memory_gb, o.vcpus, o.price_per_hour) for o in p5} == {
        ("H100", 8.0, 80.0, 192.0, Decimal("55.04"))}  # the capacity-block price was not taken
    g6f = next(o for o in offers if o.instance_type == "g6f.2xlarge")
    assert (g6f.gpu, g6f.gpu_count) == ("L4", 0.25)  # a GPU slice from GpuInfo's partition size
    g5 = [o for o in offers if o.instance_type == "g5.xlarge" and o.region == "us-west-2"]
    assert g5 and all(o.price_per_hour == Decimal("1.006") for o in g5)  # not the RHEL price
    assert all(o.spot_price_per_hour is not None for o in g5)  # from describe_spot_price_history

    result = run_cli("--db", url, "prices", "--cloud", "aws", "--gpu", "H100", "--json")
    assert result.exit_code == 0
    assert {(r["price"], r["source"].startswith("aws:")) for r in result.json()} == {(55.04, True)}


def test_refresh_failing_halfway_keeps_the_previous_prices(aws: dict[str, Any], tmp_path) -> None:
    stubber: Stubber = aws["stubber"]
    stubber.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": PAGE_1, "NextToken": "page2"},
                         expected_request())
    stubber.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": PAGE_2}, expected_request("page2"))
    stubber.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": PAGE_1, "NextToken": "page2"},
                         expected_request())
    stubber.add_client_error("get_products", "ThrottlingException", "Rate exceeded", 400)
    url = f"sqlite:///{tmp_path / 'aws.db'}"
    store = Store.open(url)
    try:
        first = refresh(store, aws_prices(aws["factory"]), None,
                        now=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1))
        with pytest.raises(RefreshError, match=r"aws price refresh failed .*ThrottlingException.*previous prices"):
            refresh(store, aws_prices(aws["factory"]), None)
    finally:
        store.close()
    assert Catalog.load(url, {"aws"}).sources["aws"].snapshot_id == first.snapshot_id


def test_refresh_of_a_region_without_gpu_offers_keeps_the_previous_prices(aws: dict[str, Any], tmp_path) -> None:
    aws["stubber"].add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []}, expected_request())
    store = Store.open(f"sqlite:///{tmp_path / 'aws.db'}")
    try:
        with pytest.raises(RefreshError, match="found no GPU offers in eu-north-1"):
            refresh(store, aws_prices(aws["factory"]), ["eu-north-1"])
    finally:
        store.close()
    assert Catalog.load(f"sqlite:///{tmp_path / 'aws.db'}", {"aws"}).sources["aws"].shipped


def test_project_is_refused_for_aws_before_any_call() -> None:
    """--project only means something to GCP; for aws it was silently ignored (and the refresh went ahead)."""
    result = run_cli("catalog", "refresh", "--cloud", "aws", "--project", "my-project")
    assert result.exit_code == 2, result.stderr
    assert result.stderr == "error: --project is not an option of --cloud aws\n"
    assert result.stdout == ""


def with_atlanta_local_zone(ec2: Any) -> Any:
    """moto knows no Local Zones: add Atlanta's (use1-atl2-az1) to us-east-1 as EC2 documents it. The zone is listed
    only when AllAvailabilityZones=True is sent (without it EC2 lists only the Local Zones the account opted in to,
    which moto would not enforce), offers p5.48xlarge, and has its own spot price."""
    asked: dict[str, Any] = {}

    def remember(params: dict[str, Any], **_: Any) -> None:
        asked.update(params.get("body") or {})

    def zones(parsed: dict[str, Any], **_: Any) -> None:
        if asked.get("AllAvailabilityZones") == "true":
            parsed["AvailabilityZones"].append({"ZoneName": "us-east-1-atl-2a", "ZoneId": "use1-atl2-az1",
                                                "ZoneType": "local-zone", "State": "available",
                                                "RegionName": "us-east-1", "GroupName": "us-east-1-atl-2"})

    def offerings(parsed: dict[str, Any], **_: Any) -> None:
        if any(o["InstanceType"] == "p5.48xlarge" for o in parsed.get("InstanceTypeOfferings", [])):
            parsed["InstanceTypeOfferings"].append({"InstanceType": "p5.48xlarge", "Location": "use1-atl2-az1",
                                                    "LocationType": "availability-zone-id"})

    def spot(parsed: dict[str, Any], **_: Any) -> None:
        parsed["SpotPriceHistory"] = [
            {**row, "SpotPrice": "17.628900" if row["AvailabilityZone"] == "us-east-1a" else "55.040000"}
            for row in parsed.get("SpotPriceHistory", []) if row["InstanceType"] == "p5.48xlarge"
        ] + [r for r in parsed.get("SpotPriceHistory", []) if r["InstanceType"] != "p5.48xlarge"]
        parsed["SpotPriceHistory"].append({"AvailabilityZone": "us-east-1-atl-2a", "InstanceType": "p5.48xlarge",
                                           "ProductDescription": "Linux/UNIX", "SpotPrice": "10.239700",
                                           "Timestamp": dt.datetime.now(dt.timezone.utc)})

    events = ec2.meta.events
    events.register("before-call.ec2.DescribeAvailabilityZones", remember)
    events.register("after-call.ec2.DescribeAvailabilityZones", zones)
    events.register("after-call.ec2.DescribeInstanceTypeOfferings", offerings)
    events.register("after-call.ec2.DescribeSpotPriceHistory", spot)
    return ec2


def test_refresh_keeps_each_zones_spot_price_and_the_local_zone_typed(aws: dict[str, Any], tmp_path) -> None:
    stubber: Stubber = aws["stubber"]
    stubber.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [PAGE_1[1]]},
                         expected_request())
    base = aws["factory"]

    def factory(service: str, region: str) -> Any:
        client = base(service, region)
        if service == "ec2" and region == "us-east-1" and not getattr(client, "_atl", False):
            with_atlanta_local_zone(client)
            client._atl = True
        return client

    url = f"sqlite:///{tmp_path / 'aws.db'}"
    store = Store.open(url)
    try:
        refresh(store, aws_prices(factory), None)
    finally:
        store.close()
    p5 = {o.zone: o for o in Catalog.load(url, {"aws"}).offers if o.instance_type == "p5.48xlarge"}
    assert p5["use1-atl2-az1"].zone_type == "local-zone"
    assert p5["use1-atl2-az1"].spot_price_per_hour == Decimal("10.2397")
    assert p5["use1-az6"].spot_price_per_hour == Decimal("17.6289")  # us-east-1a is use1-az6 in moto's account
    others = {o.spot_price_per_hour for z, o in p5.items() if z not in ("use1-az6", "use1-atl2-az1")}
    assert others == {Decimal("55.04")}  # each zone its own price, none inherits the region's cheapest
    # The same schema as the shipped snapshot: `prices` ranks the regular zone and labels the Local Zone.
    result = run_cli("--db", url, "prices", "--cloud", "aws", "--gpu", "H100", "--spot", "--json")
    assert [(r["zone"], r["zone_type"]) for r in result.json()] == [("use1-az6", "availability-zone")]
    every = run_cli("--db", url, "prices", "--cloud", "aws", "--gpu", "H100", "--spot", "--zones", "all", "--json")
    assert [(r["zone"], r["zone_type"]) for r in every.json()] == [("use1-atl2-az1", "local-zone"),
                                                                   ("use1-az6", "availability-zone")]
