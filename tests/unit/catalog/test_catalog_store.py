"""Refreshed snapshots in the database: stored atomically, the newest complete one per cloud wins."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.catalog import Catalog, Offer, load_offers
from gpuplan.catalog.snapshot import shipped_info
from gpuplan.catalog.stored import read_newest, save_snapshot
from gpuplan.store.db import Store
from gpuplan.store.models import PriceSnapshot

from support.clihelp import run_cli

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.timezone.utc)


def offer(instance_type: str = "p5.48xlarge", zone: str = "use1-az1", price: str = "55.04",
          spot: str | None = "12.345678", fetched_at: dt.datetime = NOW, gpu: str = "H100") -> Offer:
    return Offer(cloud="aws", region=zone[:4].replace("use1", "us-east-1"), zone=zone, instance_type=instance_type,
                 gpu=gpu, gpu_count=8.0, gpu_memory_gb=80.0, vcpus=192.0, memory_gb=2048.0,
                 price_per_hour=Decimal(price), spot_price_per_hour=None if spot is None else Decimal(spot),
                 arch="x86_64", source="test", fetched_at=fetched_at)


def test_newest_complete_snapshot_per_cloud_wins(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        save_snapshot(store, "aws", "older refresh", [offer(price="60")], NOW - dt.timedelta(days=1))
        newest = save_snapshot(store, "aws", "newer refresh", [offer(), offer(zone="use1-az2", spot=None)], NOW)
        with store.session() as session:  # a refresh that never finished: must be ignored
            session.add(PriceSnapshot(cloud="aws", source="broken", fetched_at=NOW + dt.timedelta(hours=1),
                                      offer_count=0, complete=False))
    finally:
        store.close()
    catalog = Catalog.load(db_url)
    aws = catalog.sources["aws"]
    assert (aws.snapshot_id, aws.source, aws.fetched_at, aws.offer_count) == (newest.id, "newer refresh", NOW, 2)
    assert not aws.shipped and catalog.sources["gcp"].shipped  # gcp was never refreshed: shipped snapshot
    stored = sorted((o for o in catalog.offers if o.cloud == "aws"), key=lambda o: o.zone or "")
    assert [o.zone for o in stored] == ["use1-az1", "use1-az2"]
    assert stored[0].price_per_hour == Decimal("55.04") and stored[0].spot_price_per_hour == Decimal("12.345678")
    assert stored[1].spot_price_per_hour is None
    assert stored[0].source == "newer refresh" and stored[0].fetched_at == NOW
    assert len(load_offers(clouds={"aws"}, db_url=db_url)) == 2
    assert load_offers(clouds={"aws"}, spot=True, db_url=db_url) == [stored[0]]


def test_a_refresh_older_than_the_shipped_snapshot_does_not_win(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = Store.open(url)
    try:
        save_snapshot(store, "aws", "ancient", [offer()], shipped_info().fetched_at - dt.timedelta(days=30))
    finally:
        store.close()
    assert Catalog.load(url).sources["aws"].shipped


class ExplodingOffers(list):
    """Offers whose iteration fails after the first row: a write that breaks halfway."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        yield self[0]
        raise RuntimeError("disk full")


def test_a_failed_write_leaves_no_snapshot(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fail.db'}"
    store = Store.open(url)
    try:
        save_snapshot(store, "aws", "good", [offer()], NOW)
        with pytest.raises(RuntimeError, match="disk full"):
            save_snapshot(store, "aws", "bad", ExplodingOffers([offer(), offer(zone="use1-az2")]),
                          NOW + dt.timedelta(hours=1))
    finally:
        store.close()
    newest = read_newest(url)
    assert newest["aws"][0].source == "good"
    with Store.open(url).session() as session:
        assert session.query(PriceSnapshot).count() == 1  # the failed one left no row, not even incomplete


def test_prices_reads_a_missing_database_without_creating_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none' / 'gpuplan.db'}"
    result = run_cli("--db", url, "prices", "--gpu", "H100", "--json")
    assert result.exit_code == 0 and result.json()
    assert not (tmp_path / "none").exists()


def test_prices_reads_refreshed_rows_without_sqlalchemy(tmp_path: Path) -> None:
    """With a refreshed SQLite DB the fast path reads it through stdlib sqlite3 and still imports no ORM."""
    url = f"sqlite:///{tmp_path / 'fast.db'}"
    store = Store.open(url)
    try:
        save_snapshot(store, "aws", "aws refresh", [offer(price="41.5")], dt.datetime.now(dt.timezone.utc))
    finally:
        store.close()
    code = (
        "import sys, runpy, json\n"
        f"sys.argv = ['gpuplan', '--db', {url!r}, 'prices', '--cloud', 'aws', '--json']\n"
        "try:\n    runpy.run_module('gpuplan', run_name='__main__')\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(proc.stderr.strip().splitlines()[-1]))
    assert "sqlalchemy" not in loaded
    rows = json.loads(proc.stdout)
    assert [(r["instance_type"], r["price"], r["source"]) for r in rows] == [("p5.48xlarge", 41.5, "aws refresh")]
    assert "warning:" not in proc.stderr  # a fresh refresh is not stale
