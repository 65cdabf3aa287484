"""The ledger's dollars: exact on a hand-built ledger (SQLite and PostgreSQL), SQL path == Decimal path."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.books import ledger
from gpuplan.runs import cost as costing
from gpuplan.store.db import Store
from gpuplan.store.models import InstanceRow, Run

from support import ledger_fixture as lf

UTC = dt.timezone.utc


def test_split_cost_min_belongs_to_start_and_slices_sum_exactly() -> None:
    inst = InstanceRow(price_per_hour=Decimal("1.10"), min_billed_seconds=60,
                                          launched_at=lf.t(2026, 11, 30, 23, 59, 30),
                                          terminated_at=lf.t(2026, 12, 1, 0, 0, 20))
    before, nov, dec = costing.split_cost(inst, [lf.t(2026, 11, 1), lf.t(2026, 12, 1)], lf.NOW)
    assert (before.seconds, nov.seconds, dec.seconds) == (0, 40, 20)
    assert (nov.cost, dec.cost) == (Decimal("0.012222"), Decimal("0.006111"))
    assert before.cost + nov.cost + dec.cost == costing.instance_cost(inst, lf.NOW) == Decimal("0.018333")


@given(price_micros=st.integers(0, 2_000_000_000), billed=st.integers(0, 10**13))
def test_integer_rule_equals_decimal_rule(price_micros: int, billed: int) -> None:
    """The SQL's integer arithmetic is the same rule as costing.instance_cost's Decimal quantize."""
    expected = (Decimal(price_micros) / 10**6 * (Decimal(billed) / 10**6) / 3600).quantize(Decimal("0.000001"))
    assert Decimal(costing.cost_micros(price_micros, billed)) / 10**6 == expected


@pytest.mark.parametrize("method", ["sql", "python"])
def test_hand_built_ledger_exact(db_url: str, method: str) -> None:
    rows = lf.seed(db_url)
    store = Store.open(db_url)
    try:
        with store.engine.connect() as conn:
            months = ledger.spend(conn, now=lf.NOW, unit="month", method=method)
            assert {r.period.strftime("%Y-%m"): r.cost for r in months.rows} == lf.MONTHS
            assert months.total_cost == lf.TOTAL == costing.total_cost(rows, lf.NOW)
            assert months.instances == 5
            projects = ledger.spend(conn, now=lf.NOW, key="project", method=method)
            assert {r.key: r.cost for r in projects.rows} == lf.PROJECTS
            november = ledger.spend(conn, now=lf.NOW, since=lf.t(2026, 11, 1), until=lf.t(2026, 12, 1),
                                    method=method)
            assert november.total_cost == lf.NOVEMBER
            # Still running: r-3 accrues to whatever `now` is.
            later = ledger.spend(conn, now=lf.NOW + dt.timedelta(hours=10), key="run", method=method)
            assert {r.key: r.cost for r in later.rows}["r-3"] == Decimal("1.006") * 238
            spot = ledger.spend(conn, now=lf.NOW, key="cloud", scope=ledger.Scope(clouds=("gcp",)), method=method)
            assert [(r.key, r.cost, r.instances) for r in spot.rows] == [("gcp", Decimal("0.036666"), 2)]
            nlp_days = ledger.spend(conn, now=lf.NOW, unit="day", scope=ledger.Scope(project="nlp"), method=method)
            assert {r.period.date().isoformat(): r.cost for r in nlp_days.rows} == {
                "2026-10-31": Decimal("196.64"), "2026-11-01": Decimal("196.64"), "2026-11-15": Decimal("0.018333"),
                "2026-11-30": Decimal("0.012222"), "2026-12-01": Decimal("0.006111")}
    finally:
        store.close()


def test_sql_path_matches_decimal_path_on_random_ledger(tmp_path: object) -> None:
    """Random instances (straddlers, running, sub-minimum, zero-length): every grouping agrees to the micro-dollar."""
    url = f"sqlite:///{tmp_path}/r.db"
    store = Store.open(url)
    rng = random.Random(7)
    now = dt.datetime(2026, 12, 15, 12, 0, 0, 123456, tzinfo=UTC)
    instances = []
    with store.session() as s:
        for n in range(30):
            run = Run(id=f"r-{n}", name="x", provider="aws", spec_text="", spec_hash="",
                      project=rng.choice(["a", "b", None]))
            s.add(run)
            s.flush()
            for k in range(5):
                start = dt.datetime(2026, 10, 25, tzinfo=UTC) + dt.timedelta(
                    seconds=rng.randint(0, 60 * 86400), microseconds=rng.randint(0, 999999))
                length = dt.timedelta(seconds=rng.choice([0, 5, 59, 61, 3600, rng.randint(0, 20 * 86400)]),
                                      microseconds=rng.randint(0, 999999))
                inst = InstanceRow(run_id=run.id, provider="aws", provider_instance_id=f"i-{k}",
                                cloud=rng.choice(["aws", "gcp"]),
                                price_per_hour=Decimal(rng.choice(["98.32", "3.600001", "0.123457", "12.5"])),
                                min_billed_seconds=rng.choice([0, 60]), launched_at=start,
                                terminated_at=None if rng.random() < 0.15 else start + length)
                s.add(inst)
                instances.append(inst)
    total = costing.total_cost(instances, now)
    window = (dt.datetime(2026, 11, 1, tzinfo=UTC), dt.datetime(2026, 12, 1, tzinfo=UTC))
    with store.engine.connect() as conn:
        for unit in (None, "day", "week", "month"):
            for key in (None, "project", "cloud"):
                for since, until in ((None, None), window, (window[0], None)):
                    a = ledger.spend(conn, now=now, unit=unit, key=key, since=since, until=until)
                    b = ledger.spend(conn, now=now, unit=unit, key=key, since=since, until=until, method="python")
                    assert a.method == "sql"
                    assert (a.rows, a.total_cost, a.instances) == (b.rows, b.total_cost, b.instances)
                    if since is None:
                        assert a.total_cost == total
    store.close()
