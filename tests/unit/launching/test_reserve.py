"""Budget reservations (gpuplan.launching.reserve): taken with the run, refused before anything is recorded when
another launch holds the money, the machines' fail-safe is the reservation at any placement's price, and a run
that ended holds nothing. On SQLite and PostgreSQL (the lock differs)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpuplan.books.budgets import BudgetRefused, get_budget, set_budget, status
from gpuplan.jobs.spec import parse_spec
from gpuplan.launching.failsafe import FailSafe
from gpuplan.launching.failsafe import failsafe as failsafe_of
from gpuplan.launching.failsafe_store import run_inputs
from gpuplan.launching.plan import plan_launch
from gpuplan.launching.reserve import reservation_usd, reserve_and_record
from gpuplan.providers.local import LocalProvider
from gpuplan.store.db import Store
from gpuplan.store.models import Run, RunState
from gpuplan.store.types import utcnow

# 8 tokens at 1 token/s + the local start-up allowance (2.1 s): estimated at $10.10 at $3600/h; max 20 s = $20.
SPEC = "name: r\ncommand: echo\nruntime: process\nworkload: {tokens: 8, throughput: 1}\nlimits: {max_hours: 20s}\n"


@pytest.fixture
def store(db_url: str) -> Store:
    opened = Store.open(db_url)
    yield opened  # type: ignore[misc]
    opened.close()


def plan(provider: LocalProvider):  # type: ignore[no-untyped-def]
    return plan_launch(parse_spec(SPEC), SPEC, provider=provider)


def test_two_fit_the_third_is_refused_before_anything_is_recorded(store: Store) -> None:
    provider = LocalProvider(price_per_hour=3600)
    with store.session() as s:
        set_budget(s, "lab", Decimal(45), "total")
    first = reserve_and_record(store, plan(provider), min_billed_seconds=0, force=False)
    second = reserve_and_record(store, plan(provider), min_billed_seconds=0, force=False)
    assert first.reserved_usd == second.reserved_usd == Decimal("20.000000")
    with pytest.raises(BudgetRefused, match=r"has \$5.00 left \(spent \$0.00, reserved \$40.00\)"):
        reserve_and_record(store, plan(provider), min_billed_seconds=0, force=False)
    with store.session() as s:
        assert s.query(Run).count() == 2
        st = status(s, get_budget(s, "lab"), utcnow())
        assert (st.reserved_usd, st.free_usd) == (Decimal(40), Decimal(5))
        for run in s.query(Run):  # ended: the reservations are released
            run.state = RunState.FAILED
    with store.session() as s:
        st = status(s, get_budget(s, "lab"), utcnow())
        assert (st.reserved_usd, st.free_usd) == (Decimal(0), Decimal(45))


def test_the_machines_fail_safe_is_the_reservation_at_any_price(store: Store) -> None:
    """No max_hours: the run reserves all that is free ($30), and a placement twice as dear gets half the time."""
    provider = LocalProvider(price_per_hour=3600)
    spec = SPEC.replace("limits: {max_hours: 20s}\n", "")
    with store.session() as s:
        set_budget(s, "lab", Decimal(30), "total")
    reserved = reserve_and_record(store, plan_launch(parse_spec(spec), spec, provider=provider),
                                  min_billed_seconds=0, force=False)
    assert reserved.reserved_usd == Decimal(30) and reserved.failsafe.hours == pytest.approx(30 / 3600)
    with store.session() as s:
        run = s.get(Run, reserved.run_id)
        for price, seconds in ((Decimal(3600), 30), (Decimal(7200), 15), (Decimal(1800), 60)):
            fs = failsafe_of(run_inputs(s, run, price_per_hour=price, nodes=1, min_billed_seconds=0, now=utcnow()))
            assert fs.hours == pytest.approx(seconds / 3600, rel=1e-6), price


def test_the_reservation_covers_the_minimum_billing_and_needs_a_price() -> None:
    fs = FailSafe(hours=10 / 3600, cap="max_hours", detail="", burn_usd_per_hour=Decimal(36))
    assert reservation_usd(fs, min_billed_seconds=60) == Decimal("0.600000")  # 60 s billed, not 10 s
    assert reservation_usd(fs, min_billed_seconds=0) == Decimal("0.100000")
    assert reservation_usd(FailSafe(hours=None, cap=None, detail="", burn_usd_per_hour=Decimal(36)), 0) is None
    assert reservation_usd(FailSafe(hours=1.0, cap="max_hours", detail="", burn_usd_per_hour=None), 0) is None
