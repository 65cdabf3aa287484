"""The machine-side fail-safe is the tightest of the run's caps (gpuplan.launching.failsafe)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from gpuplan.launching.failsafe import CoveringBudget, FailSafeInputs, failsafe, money_hours

NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.timezone.utc)


def inputs(**kw) -> FailSafeInputs:
    return FailSafeInputs(now=NOW, **kw)


def test_max_hours_alone_is_the_fail_safe() -> None:
    fs = failsafe(inputs(max_hours=2.0, price_per_hour=Decimal("3")))
    assert (fs.cap, fs.hours) == ("max_hours", 2.0)
    assert not fs.refused


def test_no_cap_bounds_nothing() -> None:
    fs = failsafe(inputs(price_per_hour=Decimal("3")))
    assert fs.hours is None and fs.cap is None and not fs.refused


def test_run_budget_limits_at_the_burn_rate_of_all_nodes() -> None:
    fs = failsafe(inputs(max_hours=10.0, budget_usd=Decimal("50"), price_per_hour=Decimal("25"), nodes=4))
    assert fs.cap == "budget_usd"
    assert fs.hours == pytest.approx(0.5)
    assert fs.detail == "$50.00 at $100.00/h"
    assert fs.summary() == "budget_usd: 0.5 h ($50.00 at $100.00/h)"
    assert [b.cap for b in fs.bounds] == ["max_hours", "budget_usd"]


def test_deadline_limits() -> None:
    fs = failsafe(inputs(max_hours=10.0, deadline_at=NOW + dt.timedelta(minutes=90)))
    assert (fs.cap, fs.hours) == ("deadline", pytest.approx(1.5))


def test_passed_deadline_refuses() -> None:
    fs = failsafe(inputs(max_hours=10.0, deadline_at=NOW - dt.timedelta(seconds=1)))
    assert fs.refused and fs.cap == "deadline" and fs.hours == 0


def test_covering_budget_limits_and_is_named() -> None:
    fs = failsafe(inputs(max_hours=10.0, budget_usd=Decimal("100"), price_per_hour=Decimal("10"),
                         budgets=[CoveringBudget("team", Decimal("20")), CoveringBudget("org", Decimal("500"))]))
    assert (fs.cap, fs.hours) == ("budget 'team'", pytest.approx(2.0))
    assert "$20.00 left at $10.00/h" in fs.detail
    assert not fs.budgets_skipped


def test_exhausted_covering_budget_refuses() -> None:
    fs = failsafe(inputs(price_per_hour=Decimal("10"), budgets=[CoveringBudget("team", Decimal("-1"))]))
    assert fs.refused and fs.cap == "budget 'team'"


def test_force_skips_covering_budgets_and_says_so() -> None:
    fs = failsafe(inputs(max_hours=10.0, price_per_hour=Decimal("10"), forced=True,
                         budgets=[CoveringBudget("team", Decimal("-5"))]))
    assert (fs.cap, fs.hours) == ("max_hours", 10.0)
    assert fs.budgets_skipped
    assert any("--force" in n and "team" in n for n in fs.notes)
    assert fs.as_dict()["budgets_skipped"] is True


def test_force_does_not_skip_the_runs_own_budget() -> None:
    fs = failsafe(inputs(budget_usd=Decimal("5"), price_per_hour=Decimal("10"), forced=True))
    assert (fs.cap, fs.hours) == ("budget_usd", pytest.approx(0.5))


def test_relaunch_gets_what_is_left_of_max_hours_and_of_the_budget() -> None:
    fs = failsafe(inputs(max_hours=4.0, hours_used=3.0, budget_usd=Decimal("100"), spent_usd=Decimal("60"),
                         price_per_hour=Decimal("10")))
    assert (fs.cap, fs.hours) == ("max_hours", pytest.approx(1.0))
    assert "less 3 h already run" in fs.detail
    budget = next(b for b in fs.bounds if b.cap == "budget_usd")
    assert budget.hours == pytest.approx(4.0)
    assert "$40.00 left of $100.00 (spent $60.00)" in budget.detail


def test_relaunch_past_max_hours_refuses() -> None:
    assert failsafe(inputs(max_hours=2.0, hours_used=2.5)).refused


def test_price_zero_means_money_does_not_bound_the_time() -> None:
    fs = failsafe(inputs(max_hours=3.0, budget_usd=Decimal("0.01"), price_per_hour=Decimal(0),
                         budgets=[CoveringBudget("team", Decimal("-1"))]))
    assert (fs.cap, fs.hours) == ("max_hours", 3.0)
    assert all(b.hours is None for b in fs.bounds if b.cap != "max_hours")
    assert "price 0" in next(b for b in fs.bounds if b.cap == "budget_usd").detail


def test_unknown_price_means_money_does_not_bound_the_time() -> None:
    fs = failsafe(inputs(budget_usd=Decimal("1"), price_per_hour=None))
    assert fs.hours is None
    assert "price unknown" in fs.bounds[0].detail


def test_minimum_billing_money_short_of_the_minimum_buys_nothing() -> None:
    # $100/h with a 60 s minimum: starting costs $1.666..., so $1 cannot pay for the start.
    fs = failsafe(inputs(budget_usd=Decimal("1"), price_per_hour=Decimal("100"), min_billed_seconds=60))
    assert fs.refused and fs.cap == "budget_usd"
    assert "60 s minimum billing" in fs.detail


def test_minimum_billing_money_past_the_minimum_lasts_money_over_burn() -> None:
    # $2 at $100/h: 72 s, more than the 60 s minimum, and 72 s cost exactly $2 under max(actual, minimum).
    hours = money_hours(Decimal("2"), inputs(price_per_hour=Decimal("100"), min_billed_seconds=60))
    assert hours == pytest.approx(72 / 3600)


def test_as_dict_carries_every_bound() -> None:
    data = failsafe(inputs(max_hours=1.0, budget_usd=Decimal("5"), price_per_hour=Decimal("2"))).as_dict()
    assert data["cap"] == "max_hours" and data["hours"] == 1.0
    assert data["burn_usd_per_hour"] == "2"
    assert {b["cap"] for b in data["bounds"]} == {"max_hours", "budget_usd"}
