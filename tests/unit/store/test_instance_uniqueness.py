"""One row per machine of a run: migration 0002 merges the duplicates a database may already hold (without losing
a billed second), then the unique index refuses new ones, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpuplan.jobs.runner import LAUNCH_FILE, NodeLaunch
from gpuplan.providers.base import TAG_RUN_ID
from gpuplan.providers.local import TAGS_FILE, LocalProvider
from gpuplan.runs.cost import instance_cost
from gpuplan.runs.events import EventKind
from gpuplan.store import migrate
from gpuplan.store.db import Store, make_engine
from gpuplan.store.models import Event, InstanceRow, Run
from gpuplan.supervise.adopt import adopt, tagged_machines

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 11, 2, tzinfo=UTC)


def t(hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, 1, hour, minute, tzinfo=UTC)


def row(run_id: str, machine: str, price: str, start: dt.datetime, end: dt.datetime | None, *,
        provider: str = "aws", region: str | None = "us-east-1", minimum: int = 60) -> InstanceRow:
    return InstanceRow(run_id=run_id, provider=provider, provider_instance_id=machine, cloud=provider, region=region,
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
        # The runs table as 0001 made it (the Run model has columns later revisions add).
        runs = sa.Table("runs", sa.MetaData(), autoload_with=s.connection())
        for run_id, provider in (("r-a", "aws"), ("r-b", "aws"), ("r-s1", "slurm"), ("r-s2", "slurm")):
            s.execute(runs.insert().values(id=run_id, name=run_id, provider=provider, spec_text="", spec_hash="",
                                           state="running", nodes=1, spot=False, created_at=t(8), updated_at=t(8)))
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
        assert store.current_revision() == migrate.HEAD_REVISION  # 0002 merged the rows; later revisions keep them
        with store.session() as s:
            ordered = select(InstanceRow).order_by(InstanceRow.id)
            rows = {(r.run_id, r.provider_instance_id): r for r in s.scalars(ordered)}
            assert len(rows) == 5 == s.query(InstanceRow).count()
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
            assert s.query(InstanceRow).count() == 2
    finally:
        store.close()


# ---- two adopters at once: the index lets one record the machine, the other reads its row ---------------------


def local_machine(root: Path, run_id: str) -> LocalProvider:
    """A local node folder tagged with the run, as LocalProvider.launch leaves it when its launcher is SIGKILLed
    before recording it (no process needed: the node is `pending`)."""
    node_dir = root / run_id / "node-0"
    node_dir.mkdir(parents=True)
    launch = NodeLaunch(run_id=run_id, name="n", argv=["true"], run_dir=str(node_dir.parent), runtime="process")
    (node_dir / LAUNCH_FILE).write_text(launch.to_json())
    (node_dir / TAGS_FILE).write_text(json.dumps({TAG_RUN_ID: run_id}))
    return LocalProvider(root=root, price_per_hour="2.50")


def adopter(url: str, run_id: str, provider: LocalProvider, barrier: threading.Barrier,
            outcomes: list[object]) -> None:
    """One gpuplan process's adoption (its own engine and session): it looks at the run's rows, waits until the
    other adopter has looked too, then adopts what the provider lists."""
    store = Store.open(url)
    try:
        with store.session() as s:
            run = s.get(Run, run_id)
            assert run is not None and not run.instances  # both see a run without rows...
            found = tagged_machines(provider, run)
            barrier.wait(timeout=60)  # ...before either records the machine
            rows = adopt(s, run, provider, NOW, found=found)
            outcomes.append([r.provider_instance_id for r in rows])
            outcomes.append(sorted(r.provider_instance_id for r in run.instances))
    except BaseException as exc:  # reported to the test thread, which asserts there is none
        outcomes.append(exc)
    finally:
        store.close()


def test_two_processes_adopting_one_machine_at_once_record_one_row(db_url: str, tmp_path: Path) -> None:
    store = Store.open(db_url)
    with store.session() as s:
        s.add(Run(id="r-race", name="race", provider="local", spec_text="", spec_hash="", state="provisioning"))
    provider = local_machine(tmp_path / "runs", "r-race")
    barrier = threading.Barrier(2)
    outcomes: list[list[object]] = [[], []]
    threads = [threading.Thread(target=adopter, args=(db_url, "r-race", provider, barrier, out)) for out in outcomes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    try:
        assert not any(thread.is_alive() for thread in threads)
        assert not [o for out in outcomes for o in out if isinstance(o, BaseException)], outcomes
        # One adopter recorded the machine; the other lost the race, and still sees the winner's row.
        assert sorted(out[0] for out in outcomes) == [[], ["r-race/node-0"]]  # type: ignore[type-var]
        assert [out[1] for out in outcomes] == [["r-race/node-0"], ["r-race/node-0"]]
        with store.session() as s:
            [row] = s.scalars(select(InstanceRow)).all()
            assert (row.provider_instance_id, row.price_per_hour) == ("r-race/node-0", Decimal("2.5"))
            adopted = s.scalars(select(Event).where(Event.kind == EventKind.ADOPTED)).all()
            assert len(adopted) == 1 and json.loads(adopted[0].data_json or "{}")["instances"] == ["r-race/node-0"]
            assert s.get(Run, "r-race").state == "running"  # type: ignore[union-attr]
    finally:
        store.close()
