"""Refreshed offers in the database: write one snapshot atomically, read the newest complete one per cloud.

Why the read path uses the stdlib sqlite3 module: `gpuplan prices` must answer in under 300 ms, and importing
SQLAlchemy's ORM alone costs ~370 ms here. The database stays the one source of truth (no cache file that could
disagree with it, or with another `--db`): for the default SQLite file the price tables are read directly with
sqlite3 (a few ms); for any other URL (PostgreSQL for a team) the same query runs through SQLAlchemy, which is
slower but correct. A database file that does not exist is not created just to look up prices.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplan.catalog.gpu_memory import vendor_gpu_memory_gb
from gpuplan.catalog.offer import Offer
from gpuplan.paths import default_db_url

if TYPE_CHECKING:
    from gpuplan.store.db import Store

SNAPSHOT_COLUMNS = "id, cloud, source, fetched_at, offer_count"
OFFER_COLUMNS = (
    "snapshot_id, cloud, region, zone, instance_type, gpu, gpu_count, gpu_memory_gb, vcpus, memory_gb, "
    "price_per_hour, spot_price_per_hour, arch"
)
NEWEST_SNAPSHOTS_SQL = (
    f"SELECT {SNAPSHOT_COLUMNS} FROM price_snapshots WHERE complete = :complete ORDER BY fetched_at DESC, id DESC"
)


@dataclass(frozen=True)
class StoredSnapshot:
    """A complete refresh of one cloud as recorded in price_snapshots."""

    id: int
    cloud: str
    source: str
    fetched_at: dt.datetime
    offer_count: int


def resolve_db_url(db_url: str | None) -> str:
    """The URL the CLI would use: --db, else GPUPLAN_DB, else the default SQLite file."""
    return db_url or os.environ.get("GPUPLAN_DB") or default_db_url()


def sqlite_file(db_url: str) -> Path | None:
    """The file of a plain `sqlite:///path` URL, or None when the URL needs SQLAlchemy (other DBs, options)."""
    prefix = "sqlite:///"
    if not db_url.startswith(prefix) or "?" in db_url:
        return None
    path = db_url[len(prefix):]
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    return Path(path).expanduser()


Newest = dict[str, tuple[StoredSnapshot, list[Offer]]]


def read_newest(db_url: str | None, clouds: Iterable[str] | None = None) -> Newest:
    """The newest complete snapshot per cloud and its offers (empty when nothing was ever refreshed)."""
    url = resolve_db_url(db_url)
    wanted = set(clouds) if clouds is not None else None
    path = sqlite_file(url)
    if path is not None:
        if not path.exists():
            return {}
        return _read_sqlite(path, wanted)
    return _read_sqlalchemy(url, wanted)


def _pick_newest(rows: Iterable[Sequence[Any]], wanted: set[str] | None) -> dict[str, StoredSnapshot]:
    newest: dict[str, StoredSnapshot] = {}
    for row in rows:  # already ordered newest first
        snap = StoredSnapshot(int(row[0]), row[1], row[2], _as_utc(row[3]), int(row[4] or 0))
        if (wanted is None or snap.cloud in wanted) and snap.cloud not in newest:
            newest[snap.cloud] = snap
    return newest


def _read_sqlite(path: Path, wanted: set[str] | None) -> dict[str, tuple[StoredSnapshot, list[Offer]]]:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error:
        return {}
    try:
        try:
            newest = _pick_newest(conn.execute(NEWEST_SNAPSHOTS_SQL.replace(":complete", "1")), wanted)
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}  # a database gpuplan has not upgraded yet holds no refreshed prices
            raise
        if not newest:
            return {}
        by_id = {snap.id: snap for snap in newest.values()}
        marks = ",".join("?" * len(by_id))
        rows = conn.execute(f"SELECT {OFFER_COLUMNS} FROM price_offers WHERE snapshot_id IN ({marks})", list(by_id))
        return _group(newest, by_id, rows)
    finally:
        conn.close()


def _read_sqlalchemy(url: str, wanted: set[str] | None) -> dict[str, tuple[StoredSnapshot, list[Offer]]]:
    from sqlalchemy import bindparam, text

    from gpuplan.store.db import Store

    store = Store.open(url)
    try:
        with store.engine.connect() as conn:
            newest = _pick_newest(conn.execute(text(NEWEST_SNAPSHOTS_SQL), {"complete": True}).all(), wanted)
            if not newest:
                return {}
            by_id = {snap.id: snap for snap in newest.values()}
            query = text(f"SELECT {OFFER_COLUMNS} FROM price_offers WHERE snapshot_id IN :ids").bindparams(
                bindparam("ids", expanding=True)
            )
            return _group(newest, by_id, conn.execute(query, {"ids": list(by_id)}).all())
    finally:
        store.close()


def _group(newest: dict[str, StoredSnapshot], by_id: dict[int, StoredSnapshot],
           rows: Iterable[Sequence[Any]]) -> dict[str, tuple[StoredSnapshot, list[Offer]]]:
    out: dict[str, tuple[StoredSnapshot, list[Offer]]] = {cloud: (snap, []) for cloud, snap in newest.items()}
    for row in rows:
        snap = by_id[int(row[0])]
        out[snap.cloud][1].append(
            Offer(
                cloud=row[1], region=row[2], zone=row[3], instance_type=row[4], gpu=row[5],
                # A refresh stored before GB-as-stated (issue #22) holds AWS's GiB: the GPU table's GB wins.
                gpu_count=float(row[6]),
                gpu_memory_gb=vendor_gpu_memory_gb(row[5], float(row[6]), _float(row[7]), "GB"), vcpus=_float(row[8]),
                memory_gb=_float(row[9]), price_per_hour=_money(row[10]), spot_price_per_hour=_money(row[11]),
                arch=row[12], source=snap.source, fetched_at=snap.fetched_at,
            )
        )
    return out


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _money(value: Any) -> Decimal | None:
    """Money column -> Decimal with the column's 6 places (SQLite hands back a float or a string)."""
    if value is None:
        return None
    if isinstance(value, Decimal):
        return value
    return Decimal(f"{float(value):.6f}").normalize() if isinstance(value, float) else Decimal(str(value))


def _as_utc(value: Any) -> dt.datetime:
    """A stored timestamp -> aware UTC (SQLite keeps naive UTC text; PostgreSQL hands back aware datetimes)."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def save_snapshot(store: Store, cloud: str, source: str, offers: Sequence[Offer],
                  fetched_at: dt.datetime) -> StoredSnapshot:
    """Record a refresh as one PriceSnapshot with its PriceOffers, in ONE transaction.

    The snapshot is marked complete only after every offer row is written; a failure anywhere rolls back the
    lot, so readers (which only look at complete snapshots) keep seeing the previous prices.
    """
    from gpuplan.store.models import PriceOffer, PriceSnapshot

    with store.session() as session:
        snapshot = PriceSnapshot(cloud=cloud, source=source[:200], fetched_at=fetched_at, offer_count=0,
                                 complete=False)
        session.add(snapshot)
        session.flush()
        session.add_all(
            PriceOffer(
                snapshot_id=snapshot.id, cloud=o.cloud, region=o.region, zone=o.zone,
                instance_type=o.instance_type, gpu=o.gpu, gpu_count=o.gpu_count, gpu_memory_gb=o.gpu_memory_gb,
                vcpus=o.vcpus, memory_gb=o.memory_gb, price_per_hour=o.price_per_hour,
                spot_price_per_hour=o.spot_price_per_hour, arch=o.arch,
            )
            for o in offers
        )
        session.flush()
        snapshot.offer_count = len(offers)
        snapshot.complete = True
        session.flush()
        return StoredSnapshot(snapshot.id, cloud, snapshot.source, fetched_at, len(offers))
