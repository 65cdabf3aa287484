"""The store keeps money exact and times in UTC on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from sqlalchemy import select

from gpuplan.store.db import Store, normalise_url
from gpuplan.store.models import Event, InstanceRow, Run, RunState


def test_round_trip_money_and_times(db_url: str) -> None:
    store = Store.open(db_url)
    launched = dt.datetime(2026, 3, 29, 0, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    with store.session() as session:
        run = Run(name="tiny", provider="local", spec_text="name: tiny\n", spec_hash="0" * 64,
                  est_cost_usd=Decimal("12.345678"))
        run.instances.append(InstanceRow(provider="local", provider_instance_id="pid-1", cloud="local",
                                      price_per_hour=Decimal("98.32"), launched_at=launched))
        session.add(run)
        session.add(Event(run=run, kind="state", message="pending"))
        run_id = run.id
    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None
        assert run.state == RunState.PENDING
        assert run.est_cost_usd == Decimal("12.345678")
        instance = run.instances[0]
        assert instance.price_per_hour == Decimal("98.32")
        assert instance.launched_at == launched
        assert instance.launched_at.tzinfo is not None
        assert instance.launched_at.utcoffset() == dt.timedelta(0)
        assert run.created_at.tzinfo is not None
        assert [e.kind for e in session.scalars(select(Event).where(Event.run_id == run_id))] == ["state"]
    store.close()


def test_naive_datetimes_are_refused(tmp_path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 's.db'}")
    with pytest.raises(Exception, match="naive datetime"), store.session() as session:
        session.add(Run(name="x", provider="local", spec_text="", spec_hash="",
                        started_at=dt.datetime(2026, 1, 1)))
        session.flush()
    store.close()


def test_sqlite_pragmas(tmp_path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 's.db'}")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
    store.close()


def test_default_database_is_in_the_data_home(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("GPUPLAN_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert normalise_url(None) == f"sqlite:///{tmp_path / 'xdg' / 'gpuplan' / 'gpuplan.db'}"


def test_bare_postgresql_url_uses_psycopg3() -> None:
    assert normalise_url("postgresql://u:p@127.0.0.1:5/db").startswith("postgresql+psycopg://")


def test_foreign_keys_cascade(db_url: str) -> None:
    store = Store.open(db_url)
    with store.session() as session:
        run = Run(name="x", provider="local", spec_text="", spec_hash="")
        run.instances.append(InstanceRow(provider="local", provider_instance_id="1", cloud="local",
                                      price_per_hour=Decimal(0)))
        session.add(run)
        run_id = run.id
    with store.session() as session:
        session.delete(session.get(Run, run_id))
    with store.session() as session:
        assert session.scalars(select(InstanceRow)).all() == []
    store.close()
