from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from gpuplan.runs.cost import billed_seconds, instance_cost, total_cost

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)


@dataclass
class Row:
    price_per_hour: Decimal
    min_billed_seconds: int
    launched_at: dt.datetime
    terminated_at: dt.datetime | None


def test_per_second_with_60s_minimum() -> None:
    short = Row(Decimal("36.00"), 60, T0, T0 + dt.timedelta(seconds=10))
    assert billed_seconds(short, T0) == 60
    assert instance_cost(short, T0) == Decimal("0.600000")
    hour = Row(Decimal("98.32"), 60, T0, T0 + dt.timedelta(hours=1, seconds=1))
    assert instance_cost(hour, T0) == (Decimal("98.32") * 3601 / 3600).quantize(Decimal("0.000001"))


def test_running_instance_accrues_to_now() -> None:
    running = Row(Decimal("3.60"), 60, T0, None)
    assert instance_cost(running, T0 + dt.timedelta(seconds=5)) == Decimal("0.060000")
    assert instance_cost(running, T0 + dt.timedelta(hours=2)) == Decimal("7.200000")


def test_no_minimum_for_local() -> None:
    local = Row(Decimal("1.00"), 0, T0, T0 + dt.timedelta(seconds=36))
    assert instance_cost(local, T0) == Decimal("0.010000")


def test_total() -> None:
    rows = [Row(Decimal("1"), 0, T0, T0 + dt.timedelta(hours=1)), Row(Decimal("2"), 0, T0, T0 + dt.timedelta(hours=1))]
    assert total_cost(rows, T0) == Decimal("3")
