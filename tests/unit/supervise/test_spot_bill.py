"""Spot as billed: a settled spot machine costs the integral of its zone's spot price history over its span.

AWS's history comes from DescribeSpotPriceHistory through botocore's Stubber, scripted as the API documents it
(the last change before StartTime comes first, then the changes in the range, over two pages): moto's history is
generated, not seeded, so it could not show that the price in effect at the start and the pagination are handled.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from gpuplan.providers.aws.spot_history import spot_price_history
from gpuplan.runs.cost import run_cost
from gpuplan.runs.events import EventKind, events_of, payload
from gpuplan.runs.payloads import SpotBilledData
from gpuplan.runs.spot_billing import integrate
from gpuplan.store.db import Store
from gpuplan.store.models import Run
from gpuplan.supervise.settle import settle

from support.spot_history import END, HISTORY, INTEGRAL, START, HistoryProvider, seed, settle_run, stubbed_ec2


def test_the_integral_starts_at_the_price_in_effect_at_the_start() -> None:
    bill = integrate(HISTORY, START, END)
    assert bill is not None and bill.cost == INTEGRAL and bill.steps == 3 and not bill.history_starts_late
    assert bill.average_price_per_hour == Decimal("18.285714")  # 64 / 3.5
    short = integrate(HISTORY, START, START + dt.timedelta(seconds=30), min_billed_seconds=60)
    assert short is not None and short.cost == Decimal("0.3") and short.seconds == 60  # the minimum at $18/h
    late = integrate(HISTORY[1:], START, END)
    assert late is not None and late.history_starts_late and late.cost == Decimal("66")  # $20 from the start
    assert integrate([], START, END) is None


def test_aws_history_follows_pages_and_keeps_the_price_before_the_start() -> None:
    ec2, stubber = stubbed_ec2()
    with stubber:
        points = spot_price_history(ec2, "us-east-1a", "p5.48xlarge", START, END)
    stubber.assert_no_pending_responses()
    assert points == HISTORY[:3]


def test_a_settled_aws_spot_run_costs_the_integral_of_its_zones_history() -> None:
    store = Store.open()
    try:
        seed(store)
        provider: Any = HistoryProvider()
        with store.session() as s:
            run = s.get(Run, "r-sp0t")
            assert run is not None and run_cost(run, END) == Decimal("61.70115")  # the launch quote
        settle_run(store, provider)
        provider.stubber.assert_no_pending_responses()
        with store.session() as s:
            run = s.get(Run, "r-sp0t")
            assert run is not None
            # What the books now say the run cost: the integral, to the micro-dollar (the row keeps the average price
            # 64 / 3.5 h = 18.285714 $/h in Money's 6 places; the event keeps the exact integral).
            assert abs(run_cost(run, END) - INTEGRAL) <= Decimal("0.000001") * 4
            [event] = events_of(run, [EventKind.SPOT_BILLED])
            data = payload(event, SpotBilledData)
            assert data is not None and data.quoted_cost_usd == Decimal("61.701150")
            assert data.billed_cost_usd == Decimal("64.000000") and str(data.billed_cost_usd) == "64.000000"
            assert data.source == "aws: DescribeSpotPriceHistory" and data.price_steps == 3
            settle(s, run, provider)  # a second settle bills nothing twice (and asks nothing: the stub is empty)
            assert len(events_of(run, [EventKind.SPOT_BILLED])) == 1
    finally:
        store.close()


def test_a_gcp_spot_machine_is_billed_at_the_regions_spot_price() -> None:
    store = Store.open()
    try:
        seed(store, cloud="gcp", price="1.0", itype="n1-standard-4", region="us-central1", zone="us-central1-a",
             gpu="T4", count=1)
        with store.session() as s:
            run = s.get(Run, "r-sp0t")
            assert run is not None
            settle(s, run, None)
            settle(s, run, None)  # twice in one session: billed once
        with store.session() as s:
            run = s.get(Run, "r-sp0t")
            assert run is not None
            [event] = events_of(run, [EventKind.SPOT_BILLED])
            data = payload(event, SpotBilledData)
            # the shipped snapshot: n1-standard-4 (4/16 x 0.20892) + T4 spot 0.175 = 0.22723 $/h in us-central1
            assert data is not None and data.billed_price_per_hour == Decimal("0.227230")
            assert data.source is not None and data.source.startswith("gcp: region spot price")
            assert run_cost(run, END) == Decimal("0.795305")  # 0.22723 x 3.5 h
    finally:
        store.close()


@pytest.mark.parametrize("spot", [False, True])
def test_on_demand_and_unpriced_machines_keep_their_quote(spot: bool) -> None:
    store = Store.open()
    try:
        seed(store, cloud="aws", spot=spot)
        with store.session() as s:
            run = s.get(Run, "r-sp0t")
            assert run is not None
            settle(s, run, None)  # no provider that can tell the history: the quote stands
            assert events_of(run, [EventKind.SPOT_BILLED]) == [] and run_cost(run, END) == Decimal("61.70115")
    finally:
        store.close()
