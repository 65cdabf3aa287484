"""One migrator at a time: the lock every process takes before it upgrades a database's schema.

Sixteen gpuplan processes started together on a database that does not exist yet all saw "no schema" and all
ran the migrations: fifteen failed (`table alembic_version already exists` on SQLite; `UniqueViolation
pg_type_typname_nsp_index` on PostgreSQL, two CREATE TABLEs of one name racing). Now the upgrade runs under a
lock, and the upgrade reads the revision again once it holds it, so the others wait and then find the schema
at head (Alembic's upgrade from head is a no-op):

- SQLite: an exclusive `flock` on a file beside the database (`<db>.migrate.lock`, 0600). SQLite's own locks
  cannot serve: its DDL autocommits per statement under pysqlite, and a lock file works before the database
  file even has a schema.
- PostgreSQL: `pg_advisory_xact_lock` in the migration's own transaction: held until the transaction (the whole
  upgrade, which PostgreSQL runs as one, DDL included) commits or rolls back, and released by the server even
  if the process dies (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import make_url

from gpuplan.paths import PRIVATE_FILE_MODE

# The advisory lock's key: any 64-bit number no other application on the server uses; this is "gpuplan" in ASCII.
ADVISORY_KEY = 0x677075706C616E


def sqlite_lock_path(engine: Engine) -> Path | None:
    """The lock file beside a SQLite database file; None for other databases and in-memory SQLite."""
    url = make_url(engine.url)
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser().with_name(Path(database).name + ".migrate.lock")


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created 0600) for the block; waits for whoever holds it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, PRIVATE_FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextlib.contextmanager
def migration_lock(engine: Engine) -> Iterator[None]:
    """The file lock of a SQLite database file for the block (no-op for other databases: see `in_transaction`)."""
    path = sqlite_lock_path(engine)
    if path is None:
        yield
        return
    with file_lock(path):
        yield


def in_transaction(connection: Connection) -> None:
    """Make the upgrade on `connection` one transaction that holds the lock: PostgreSQL's advisory lock; on SQLite
    an explicit `BEGIN IMMEDIATE`, because pysqlite opens no transaction before DDL (each CREATE TABLE committed
    on its own), so a gpuplan interrupted mid-upgrade (Ctrl-C on a first use) left tables without a version row,
    and every later process failed with `table budgets already exists`. SQLite's DDL is transactional: now an
    interrupted upgrade rolls back whole."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_KEY})
    elif connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
