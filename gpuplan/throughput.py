"""Which throughput an estimate uses: the user's, a bench record, a calibrated MFU, or the default prior.

`resolve_throughput` is the one place that applies the order of preference
    --throughput / --mfu (user)  >  a matching `gpuplan bench` record  >  a calibrated MFU  >  default prior.
Lookups are plain callables so the bench and calibration features can plug in their own; the defaults here read
the store with the stdlib sqlite3 module, read-only, and only when the SQLite file exists, so the common
`gpuplan estimate` path never imports SQLAlchemy (it must answer in < 150 ms). A non-SQLite store (PostgreSQL)
is read through SQLAlchemy, lazily.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from gpuplan.architecture import Architecture
from gpuplan.estimate import Throughput
from gpuplan.paths import default_db_url


@dataclass(frozen=True)
class LookupKey:
    """What a stored measurement must match to stand in for this workload."""

    gpu: str
    params: int
    precision: str
    seq_len: int
    architecture: Architecture | None


Lookup = Callable[[LookupKey], Throughput | None]


def params_bucket(params: float) -> str:
    """The model-size bucket calibrations are stored under: decades of parameters (`1B-10B`, `10B-100B`, ...)."""
    edges = [(1e6, "<1M"), (1e7, "1M-10M"), (1e8, "10M-100M"), (1e9, "100M-1B"), (1e10, "1B-10B"),
             (1e11, "10B-100B"), (1e12, "100B-1T")]
    for edge, name in edges:
        if params < edge:
            return name
    return ">1T"


def resolve_throughput(*, tokens_per_s: float | None, mfu: float | None, key: LookupKey,
                       lookups: Sequence[Lookup] = ()) -> Throughput | None:
    """The user's number, else the first lookup that answers, else None (= the default MFU prior).

    Raises ValueError when both a throughput and an MFU are given (they would contradict each other).
    """
    if tokens_per_s is not None and mfu is not None:
        raise ValueError("give --throughput or --mfu, not both")
    if tokens_per_s is not None:
        return Throughput(tokens_per_s_per_gpu=tokens_per_s, source="user", detail="--throughput")
    if mfu is not None:
        return Throughput(mfu=mfu, source="user", detail="--mfu")
    for lookup in lookups:
        found = lookup(key)
        if found is not None:
            return found
    return None


def sqlite_path(db_url: str | None) -> Path | None:
    """The file of a `sqlite:///...` URL (None for other databases and in-memory SQLite)."""
    url = db_url or default_db_url()
    for prefix in ("sqlite:///", "sqlite+pysqlite:///"):
        if url.startswith(prefix):
            path = unquote(url[len(prefix):].split("?", 1)[0])
            return Path(path).expanduser() if path and path != ":memory:" else None
    return None


def _query(db_url: str | None, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
    """Rows of a read-only query on the store; [] when there is no store yet or the table is missing."""
    path = sqlite_path(db_url)
    if path is not None:
        if not path.exists():
            return []
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
                return list(conn.execute(sql, params).fetchall())
        except sqlite3.Error:
            return []
    if db_url is None or db_url.startswith("sqlite"):
        return []
    from sqlalchemy import create_engine, text  # another database (PostgreSQL): only then pay for SQLAlchemy
    from sqlalchemy.exc import SQLAlchemyError

    from gpuplan.store.db import normalise_url

    named = sql
    for i in range(len(params)):
        named = named.replace("?", f":p{i}", 1)
    engine = create_engine(normalise_url(db_url))
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(named), {f"p{i}": p for i, p in enumerate(params)})]
    except SQLAlchemyError:
        return []
    finally:
        engine.dispose()


def bench_lookup(db_url: str | None) -> Lookup:
    """The newest `gpuplan bench` record of this model shape on this GPU, precision and sequence length."""

    def lookup(key: LookupKey) -> Throughput | None:
        if key.architecture is None:
            return None
        rows = _query(
            db_url,
            "SELECT tokens_per_s, id, created_at FROM benchmarks WHERE gpu = ? AND model_signature = ? "
            "AND precision = ? AND seq_len = ? AND tokens_per_s > 0 ORDER BY created_at DESC, id DESC LIMIT 1",
            (key.gpu, key.architecture.signature(), key.precision, key.seq_len),
        )
        if not rows:
            return None
        tokens_per_s, bench_id, created = rows[0]
        return Throughput(tokens_per_s_per_gpu=float(tokens_per_s), source="bench",  # type: ignore[arg-type]
                          detail=f"bench record #{bench_id} ({created})")

    return lookup


def calibration_lookup(db_url: str | None) -> Lookup:
    """The newest MFU calibrated from finished runs on this GPU in this model-size bucket."""

    def lookup(key: LookupKey) -> Throughput | None:
        bucket = params_bucket(key.params)
        rows = _query(
            db_url,
            "SELECT mfu, samples, id FROM calibrations WHERE gpu = ? AND params_bucket = ? AND mfu > 0 "
            "ORDER BY created_at DESC, id DESC LIMIT 1",
            (key.gpu, bucket),
        )
        if not rows:
            return None
        mfu, samples, cal_id = rows[0]
        return Throughput(mfu=min(1.0, float(mfu)), source="calibrated",  # type: ignore[arg-type]
                          detail=f"calibration #{cal_id} ({key.gpu}, {bucket}, {samples} run(s))")

    return lookup


def store_lookups(db_url: str | None) -> list[Lookup]:
    """The default lookups in order of preference: bench records, then calibrations."""
    return [bench_lookup(db_url), calibration_lookup(db_url)]
