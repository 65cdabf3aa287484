"""One row per machine of a run: migration 0002 merges the duplicates a database may already hold (without losing
a billed second), then the unique index refuses new ones, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from alembic import command
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpuplan.costing import instance_cost
from gpuplan.store import migrate
from gpuplan.store.db import Store, make_engine
from gpuplan.store.models import Event, Instance, Run

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 11, 2, tzinfo=UTC)


def t(hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, 1, hour, minute, tzinfo=UTC)


def row(run_id: str, machine: str, price: str, start: dt.datetime, end: dt.datetime | None, *,
        provider: str = "aws", region: str | None = "us-east-1", minimum: int = 60) -> Instance:
    return Instance(run_id=run_id, provider=provider, provider_instance_id=machine, cloud=provider, region=region,
                    instance_type="p3.2xlarge", gpu="V100", gpu_count=1, price_per_hour=Decimal(price),
                    min_billed_seconds=minimum, launched_at=start, terminated_at=end,
                    state="running" if end is None else "terminated")


def database_at_0001(url: str) -> None:
    """A database as gpuplan 0001 left it, holding the duplicates two racing adopters could write."""
    engine = make_engine(url)
    cfg = migrate.alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
    with Session(engine) as s:
        for run_id, provider in (("r-a", "aws"), ("r-b", "aws"), ("r-s1", "slurm"), ("r-s2", "slurm")):
            s.add(Run(id=run_id, name=run_id, provider=provider, spec_text="", spec_hash="", state="running"))
        s.flush()
        s.add_all([
            # r-a's machine recorded three times: once unpriced and closed, once priced and still open (the
            # process that recorded it never closed it), once priced and closed early.
            row("r-a", "i-dup", "0", t(10), t(11), region=None),
            row("r-a", "i-dup", "3.06", t(10, 5), None),
            row("r-a", "i-dup", "3.06", t(10), t(10, 30)),
            row("r-a", "i-solo", "3.06", t(10), t(12)),
            # r-b's machine twice, both closed: the later end wins.
            row("r-b", "i-twice", "3.06", t(9), t(10)),
            row("r-b", "i-twice", "3.06", t(9), t(13), minimum=0),
            # One Slurm job id in two runs (two clusters): two machines, both kept.
            row("r-s1", "1234", "2", t(8), t(9), provider="slurm", region=None),
            row("r-s2", "1234", "2", t(8), t(10), provider="slurm", region=None),
        ])
        s.commit()
    engine.dispose()


def test_upgrade_merges_duplicate_rows_keeping_the_longest_billed_span(db_url: str) -> None:
    database_at_0001(db_url)
    store = Store.open(db_url)  # what every gpuplan command does on first use
    try:
        assert store.current_revision() == migrate.HEAD_REVISION == "0002"
        with store.session() as s:
            rows = {(r.run_id, r.provider_instance_id): r for r in s.scalars(select(Instance).order_by(Instance.id))}
            assert len(rows) == 5 == s.query(Instance).count()
            dup = rows[("r-a", "i-dup")]
            assert dup.id == 1  # the earliest row is kept
            assert (dup.launched_at, dup.terminated_at, dup.state) == (t(10), None, "running")
            assert dup.price_per_hour == Decimal("3.06") and dup.region == "us-east-1"
            twice = rows[("r-b", "i-twice")]
            assert (twice.launched_at, twice.terminated_at, twice.min_billed_seconds) == (t(9), t(13), 60)
            assert instance_cost(twice, NOW) == Decimal("12.24")  # 4 h at $3.06, not 1 h, not 5 h
            assert rows[("r-a", "i-solo")].terminated_at == t(12)
            assert rows[("r-s1", "1234")].terminated_at == t(9) and rows[("r-s2", "1234")].terminated_at == t(10)

            merged = {e.run_id: json.loads(e.data_json or "{}")
                      for e in s.scalars(select(Event).where(Event.kind == "instances_merged"))}
            assert set(merged) == {"r-a", "r-b"}
            assert merged["r-a"]["kept"] == 1 and merged["r-a"]["removed"] == [2, 3]
            assert [r["price_per_hour"] for r in merged["r-a"]["rows"]] == ["0.000000", "3.060000", "3.060000"]
    finally:
        store.close()


def test_the_index_refuses_a_second_row_for_a_machine_but_not_for_another_run(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        with store.session() as s:
            for run_id in ("r-1", "r-2"):
                s.add(Run(id=run_id, name=run_id, provider="slurm", spec_text="", spec_hash=""))
            s.flush()
            s.add_all([row("r-1", "77", "1", t(1), None, provider="slurm"),
                       row("r-2", "77", "1", t(1), None, provider="slurm")])
        with pytest.raises(IntegrityError), store.session() as s:
            s.add(row("r-1", "77", "1", t(2), None, provider="slurm"))
        with store.session() as s:
            assert s.query(Instance).count() == 2
    finally:
        store.close()
