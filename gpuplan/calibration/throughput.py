"""Which throughput an estimate uses: the user's, a bench record, a calibrated MFU, or (None) the step model.

`resolve_throughput` is the one place that applies the order of preference
    --throughput / --mfu (user)  >  a matching `gpuplan bench` record  >  a calibrated MFU  >  the step model.
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

from gpuplan.estimating.architecture import Architecture
from gpuplan.estimating.estimate import Throughput
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
    """The model-size bucket calibrations are stored under (one definition: gpuplan.calibration.run_mfu's)."""
    from gpuplan.calibration.run_mfu import params_bucket as bucket

    return bucket(params)


def resolve_throughput(*, tokens_per_s: float | None, mfu: float | None, key: LookupKey,
                       lookups: Sequence[Lookup] = ()) -> Throughput | None:
    """The user's number, else the first lookup that answers, else None (= the step model).

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
    """The best `gpuplan bench` record of this model shape (gpuplan.bench.records.best_bench ranks them).

    Same GPU, precision and sequence length, full model: its measured tokens/s per GPU. Otherwise (another GPU
    type, precision or length, or a shallow `--layers` proxy) its measured MFU, applied to this GPU's peak and
    labelled as transferred.
    """
    from gpuplan.bench.records import CANDIDATE_SQL, best_bench, candidate_from_row

    def lookup(key: LookupKey) -> Throughput | None:
        if key.architecture is None:
            return None
        rows = _query(db_url, CANDIDATE_SQL, (key.architecture.signature(),))
        match = best_bench([candidate_from_row(r) for r in rows], gpu=key.gpu, precision=key.precision,
                           seq_len=key.seq_len)
        if match is None:
            return None
        ref = {"bench_id": match.bench_id, "transferred": match.transferred, "gpu": match.gpu,
               "precision": match.precision, "seq_len": match.seq_len, "proxy_layers": match.proxy_layers}
        if not match.transferred and match.proxy_layers is None and match.tokens_per_s > 0:
            return Throughput(tokens_per_s_per_gpu=match.tokens_per_s, source="bench", detail=match.note, ref=ref)
        if match.mfu is None:
            return None
        return Throughput(mfu=min(1.0, match.mfu), source="bench", detail=match.note, ref=ref)

    return lookup


def calibration_lookup(db_url: str | None) -> Lookup:
    """The MFU calibrated from finished runs on this GPU in this model-size bucket (the newest learning step)."""

    def lookup(key: LookupKey) -> Throughput | None:
        bucket = params_bucket(key.params)
        rows = _query(
            db_url,
            "SELECT mfu, samples, id FROM calibrations WHERE gpu = ? AND params_bucket = ? AND mfu > 0 "
            "ORDER BY id DESC LIMIT 1",
            (key.gpu, bucket),
        )
        if not rows:
            return None
        mfu, samples, cal_id = rows[0]
        if not isinstance(mfu, (int, float)):  # a REAL column; sqlite3 rows are typed as any object
            return None
        runs = [str(r[0]) for r in _query(
            db_url, "SELECT run_id FROM calibrations WHERE gpu = ? AND params_bucket = ? AND run_id IS NOT NULL "
                    "ORDER BY id", (key.gpu, bucket))]
        return Throughput(mfu=min(1.0, float(mfu)), source="calibrated",
                          detail=f"calibration #{cal_id} ({key.gpu}, {bucket}, {samples} run(s))",
                          ref={"calibration_id": cal_id, "params_bucket": bucket, "samples": samples,
                               "run_ids": runs})

    return lookup


def store_lookups(db_url: str | None) -> list[Lookup]:
    """The default lookups in order of preference: bench records, then calibrations."""
    return [bench_lookup(db_url), calibration_lookup(db_url)]
