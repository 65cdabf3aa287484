"""An adopted machine nobody quoted a price for is billed from the price catalog, not at $0 (moto EC2, SQLite).

The machine is a real (moto) EC2 instance tagged with the run and carrying no price tag, whose launch plan has no
price either: what a launch SIGKILLed between RunInstances and its commit leaves when its offer had no price.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from gpuplan.catalog import Catalog, Offer
from gpuplan.catalog.stored import save_snapshot
from gpuplan.launching.failover import Placement
from gpuplan.launching.launch_plan import add_launch_plan
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.base import LaunchRequest
from gpuplan.runs.events import EventKind
from gpuplan.store.db import Store
from gpuplan.store.models import Event, Run
from gpuplan.store.types import utcnow
from gpuplan.supervise.adopt import adopt

TYPE, REGION = "g4dn.xlarge", "us-east-1"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = Store.open(f"sqlite:///{tmp_path / 'books.db'}")
    yield opened
    opened.close()


def orphan(store: Store, provider: Any, run_id: str, *, spot: bool = False, instance_type: str = TYPE,
           plan_price: Decimal | None = None) -> str:
    """A run whose launch recorded an unpriced plan and started a machine, then died before recording it."""
    with store.session() as s:
        run = Run(id=run_id, name="orphan", provider=provider.name, spec_text="", spec_hash="",
                  state="provisioning", region=REGION, instance_type=instance_type, spot=spot)
        s.add(run)
        add_launch_plan(s, run, provider, [Placement(provider.name, REGION, None, instance_type, plan_price, spot)])
    [machine] = provider.launch(LaunchRequest(run_id=run_id, name="orphan", command="true", run_dir="/tmp/x",
                                              instance_type=instance_type, region=REGION, spot=spot,
                                              gpu="T4", gpus_per_node=1, price_per_hour=None))
    assert machine.price_per_hour is None  # nothing on the machine says what it costs
    return machine.instance_id


def adopt_now(store: Store, provider: Any, run_id: str) -> tuple[Any, dict[str, Any]]:
    with store.session() as s:
        run = s.get(Run, run_id)
        [row] = adopt(s, run, provider, utcnow())
        [event] = s.scalars(select(Event).where(Event.run_id == run_id, Event.kind == EventKind.ADOPTED)).all()
        s.expunge(row)
        return row, {"message": event.message, **json.loads(event.data_json or "{}")}


def catalog_prices(store: Store, spot: bool) -> set[Decimal]:
    offers = Catalog.load(store.url, ["aws"]).select(clouds=["aws"], spot=spot)
    return {o.price(spot) for o in offers if o.region == REGION and o.instance_type == TYPE}  # type: ignore[misc]


def test_unpriced_on_demand_machine_is_billed_at_the_catalog_price(store: Store, aws: AwsProvider) -> None:
    machine = orphan(store, aws, "r-ondemand1")
    row, event = adopt_now(store, aws, "r-ondemand1")
    [expected] = catalog_prices(store, spot=False)  # on-demand: one price across the region's zones
    assert row.price_per_hour == expected > 0
    assert event["unpriced"] == [] and "billed at 0" not in event["message"]
    quote = event["prices"][machine]
    assert quote["source"] == "catalog" and Decimal(quote["price_per_hour"]) == expected
    assert "on-demand" in quote["detail"] and TYPE in quote["detail"]


def test_unpriced_spot_machine_is_billed_at_the_region_s_highest_spot_price(store: Store,
                                                                             aws: AwsProvider) -> None:
    machine = orphan(store, aws, "r-spot00001", spot=True)
    row, event = adopt_now(store, aws, "r-spot00001")
    spot_prices = catalog_prices(store, spot=True)
    assert len(spot_prices) > 1  # the zones differ; the machine's AZ name is not in an AZ-id catalog
    assert row.spot and row.price_per_hour == max(spot_prices)
    assert event["prices"][machine]["source"] == "catalog" and "spot" in event["prices"][machine]["detail"]


def test_a_refreshed_catalog_is_preferred_to_the_shipped_one(store: Store, aws: AwsProvider) -> None:
    refreshed = Offer(cloud="aws", region=REGION, zone="use1-az1", instance_type=TYPE, gpu="T4", gpu_count=1,
                      gpu_memory_gb=16, vcpus=4, memory_gb=16, price_per_hour=Decimal("3.5"),
                      spot_price_per_hour=None, arch="x86_64", source="test-refresh", fetched_at=utcnow())
    save_snapshot(store, "aws", "test-refresh", [refreshed], utcnow() + dt.timedelta(seconds=1))
    machine = orphan(store, aws, "r-refresh01")
    row, event = adopt_now(store, aws, "r-refresh01")
    assert row.price_per_hour == Decimal("3.5")
    assert event["prices"][machine]["detail"].startswith("test-refresh")


def test_a_type_the_catalog_does_not_know_is_still_billed_at_0_and_said_so(store: Store, aws: AwsProvider) -> None:
    machine = orphan(store, aws, "r-nocatalog", instance_type="t3.micro")
    row, event = adopt_now(store, aws, "r-nocatalog")
    assert row.price_per_hour == 0
    assert event["unpriced"] == [machine] and "billed at 0" in event["message"]
    assert event["prices"][machine] == {"source": "none", "price_per_hour": None, "detail": None}


def test_the_launch_plan_s_price_still_comes_before_the_catalog(store: Store, aws: AwsProvider) -> None:
    machine = orphan(store, aws, "r-planned01", plan_price=Decimal("2.75"))
    row, event = adopt_now(store, aws, "r-planned01")
    assert row.price_per_hour == Decimal("2.75")
    assert event["prices"][machine] == {"source": "launch_plan", "price_per_hour": "2.75", "detail": None}
