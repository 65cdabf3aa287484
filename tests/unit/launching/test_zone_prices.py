"""A placement is priced at its own zone's catalog price: quoted, recorded on the machine and used by the fail-safe
(gpuplan.launching.zone_prices), with AWS zone names mapped to the catalog's zone ids by the account's zones."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, ClassVar

from gpuplan.catalog import Catalog
from gpuplan.launching.failover import Placement
from gpuplan.launching.placements import start_with_failover
from gpuplan.launching.zone_prices import ZonePrices, catalog_zone_prices, cheapest_first, priced_in_zone
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.base import LaunchRequest

from support.awsmoto import Injector, in_zone, inject


def request(**overrides: Any) -> LaunchRequest:
    values: dict[str, Any] = dict(run_id="r-z0neprice1", name="zp", command="true", run_dir="/tmp/zp",
                                  instance_type="p5.48xlarge", region="us-east-1", gpu="H100", gpus_per_node=8,
                                  spot=True, price_per_hour=Decimal("17.6289"), boot_script="#!/bin/sh\n")
    values.update(overrides)
    return LaunchRequest(**values)


class Ids:
    """A provider whose zone names map to catalog ids as moto's us-east-1 does (us-east-1a is use1-az6)."""

    names: ClassVar[dict[str, str]] = {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1", "us-east-1c": "use1-az2"}

    def catalog_zone(self, region: str, zone: str) -> str:
        return self.names.get(zone, zone)


def test_each_zone_has_its_own_price_and_an_unlisted_zone_the_dearest() -> None:
    prices = ZonePrices.of(Catalog.load(None, ("aws",)).select(gpus={"H100"}, zones="all"), spot=True)
    assert prices.price("us-east-1", "p5.48xlarge", "use1-az6") == Decimal("17.6289")
    assert prices.price("us-east-1", "p5.48xlarge", "use1-az1") == Decimal("55.04")
    assert prices.price("us-east-1", "p5.48xlarge", "use1-az99") == Decimal("55.04")  # unknown: err high
    provider: Any = Ids()
    assert priced_in_zone(request(zones=("us-east-1b",)), provider, prices).price_per_hour == Decimal("55.04")
    assert priced_in_zone(request(zones=()), provider, prices).price_per_hour == Decimal("17.6289")
    assert cheapest_first(["us-east-1b", "us-east-1c", "us-east-1a", "us-east-1x"], "us-east-1", "p5.48xlarge",
                          provider, prices) == ["us-east-1a", "us-east-1c", "us-east-1b", "us-east-1x"]


def test_the_recorded_launch_price_is_the_zone_it_landed_in(aws: AwsProvider) -> None:
    """us-east-1a (use1-az6, $17.63) has no capacity: the run lands in the next cheapest zone, us-east-1c
    (use1-az2, $19.25), and that zone's price is what the machine carries, not the region's cheapest."""
    inject(aws.launch_client("us-east-1"), "RunInstances", Injector("InsufficientInstanceCapacity",
                                                                   when=in_zone("us-east-1a")), server=False)
    placement = Placement("aws", "us-east-1", None, "p5.48xlarge", Decimal("17.6289"), True)
    result = start_with_failover(aws, request(), placements=[placement])
    assert [(a.placement.zone, a.outcome) for a in result.attempts] == [
        ("us-east-1a", "capacity"), ("us-east-1c", "launched")]
    assert result.request.price_per_hour == Decimal("19.2531")
    assert [i.price_per_hour for i in aws.list_tagged("r-z0neprice1")] == [Decimal("19.2531")]
    assert aws.catalog_zone("us-east-1", "us-east-1c") == "use1-az2"


def test_a_gpu_the_catalog_does_not_price_keeps_the_offer_price() -> None:
    assert catalog_zone_prices("aws", "RTX 4090", spot=True, gpu_count=1, db_url=None).by_zone == {}
    assert catalog_zone_prices("slurm", "H100", spot=False, gpu_count=8, db_url=None).by_zone == {}
