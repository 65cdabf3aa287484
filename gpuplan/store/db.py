"""Open the database, upgrade it to the current schema, and hand out sessions.

SQLite (the default, a file in the XDG data dir) is opened in WAL mode with a busy timeout and foreign keys on,
so a `gpuplan watch` loop and a `gpuplan status` can share it. Any SQLAlchemy URL works; PostgreSQL is tested.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from gpuplan.errors import GpuplanError, UserError
from gpuplan.paths import create_private_file, default_db_url, expand_user, make_private_dir
from gpuplan.store import migrate

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalise_url(url: str | None) -> str:
    """Resolve the default and pick the psycopg (v3) driver for bare `postgresql://` URLs.

    SQLAlchemy maps `postgresql://` to psycopg2, which gpuplan does not install; users copy URLs from
    elsewhere, so accept the bare form rather than fail on a missing module.
    """
    url = url or default_db_url()
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        # A non-numeric port ('postgresql://u@host:abc/db', an unclosed '[::1') raises ValueError, not
        # ArgumentError: it is still the user's URL that is wrong, so one line and exit 2, not a crash.
        raise UserError(f"not a database URL: {url!r} (expected e.g. sqlite:///path/gpuplan.db)") from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(url: str) -> Engine:
    """An engine for `url`; for SQLite files, creates the file (0600) and its folder (0700), sets the pragmas."""
    parsed = make_url(url)
    kwargs: dict[str, Any] = {"future": True}
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            # The books (and every run's spec) are the user's alone: a new database file is 0600 in a folder
            # gpuplan creates 0700, whatever the umask; SQLite gives its -wal/-shm files the database's mode.
            path = expand_user(database)
            if path.is_dir():
                raise UserError(f"the database path {path} is a folder; name a file in it (e.g. {path / 'gpuplan.db'})")
            if path.is_symlink() and _symlink_loop(path):  # SQLite says "unable to open database file", exit 1
                raise UserError(f"the database path {path} is a symbolic link loop; name the file itself")
            if path.is_symlink() and not path.resolve().parent.is_dir():
                raise UserError(f"the database path {path} links to {path.resolve()}, whose folder does not exist")
            if path.exists() and not path.is_file():  # a FIFO, a device, a socket: SQLite says "disk I/O error"
                raise UserError(f"the database path {path} is not a regular file; name a file (e.g. "
                                f"{path.parent / 'gpuplan.db'})")
            try:
                make_private_dir(path.parent)
                create_private_file(path)
            except OSError as exc:  # /proc/self/x.db, a read-only folder, a path through a file
                raise UserError(f"cannot create the database file {path}: {exc.strerror or exc}") from exc
            # Left open by a process that was killed mid-write? Checked (read-only) before anything writes to it.
            from gpuplan.store.unclean import check_after_unclean_stop

            check_after_unclean_stop(path)
        kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(url, **kwargs)
    except (NoSuchModuleError, ModuleNotFoundError) as exc:
        raise UserError(f"no database driver for {parsed.drivername!r}: {exc}") from exc
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _symlink_loop(path: Path) -> bool:
    try:
        path.resolve(strict=False)
    except (RuntimeError, OSError):  # Python 3.11: RuntimeError("Symlink loop"); later: OSError(ELOOP)
        return True
    return False


@dataclass
class Store:
    """The opened database: an engine plus a session factory."""

    url: str
    engine: Engine
    session_factory: sessionmaker[Session]

    @classmethod
    def open(cls, url: str | None = None, *, upgrade: bool = True) -> Store:
        """Open the database at `url` (default: the XDG SQLite file) and bring its schema to head."""
        url = normalise_url(url)
        engine = make_engine(url)
        store = cls(url=url, engine=engine, session_factory=sessionmaker(engine, expire_on_commit=False))
        if upgrade:
            store.ensure_schema()
        return store

    def ensure_schema(self) -> None:
        """Upgrade to head unless already there; the at-head check costs one query, not an Alembic import."""
        current = self.current_revision()
        if current == migrate.HEAD_REVISION:
            return
        if current is not None and current not in migrate.known_revisions():
            raise GpuplanError(
                f"the database {self.safe_url} is at revision {current}, which this gpuplan does not know "
                "(written by a newer version?); upgrade gpuplan"
            )
        log.info("upgrading database %s from %s to %s", self.safe_url, current, migrate.HEAD_REVISION)
        migrate.upgrade(self.engine, "head")

    def current_revision(self) -> str | None:
        """The Alembic revision stamped in the database, or None for an empty database; more than one is refused.

        The first query on a new URL is where a wrong --db shows: a server or file that cannot be opened is a
        failure (exit 1), a file that is not a database at all (SQLite's 'file is not a database') is the
        user pointing --db at the wrong file (exit 2).
        """
        try:
            with self.engine.connect() as conn:
                if not inspect(conn).has_table("alembic_version"):
                    return None
                versions = list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
        except OperationalError as exc:
            full = self._full_disk()
            if full:
                raise UserError(f"cannot open the database {self.safe_url}: {full}") from exc
            raise GpuplanError(f"cannot open the database {self.safe_url}: {exc.orig}") from exc
        except DatabaseError as exc:
            raise UserError(f"{self.safe_url} is not a database: {exc.orig}") from exc
        if len(versions) > 1:
            # Alembic keeps one row per branch head; gpuplan's history has one branch, so more rows mean a schema
            # this gpuplan did not write (a newer one with branches, or a hand edit): reading only the first row
            # would take it for one it knows.
            raise GpuplanError(f"the database {self.safe_url} has {len(versions)} schema versions "
                               f"({', '.join(sorted(map(str, versions)))}); this gpuplan writes one: upgrade gpuplan "
                               "or repair the alembic_version table")
        return versions[0] if versions else None

    def _full_disk(self) -> str | None:
        """Why a SQLite file cannot be opened when its disk is full (its -wal/-shm files cannot be made), else
        None: the user's disk, not our failure (exit 2)."""
        from gpuplan.store.space import free_bytes, holds_no_files

        parsed = make_url(self.url)
        if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
            return None
        folder = Path(parsed.database).expanduser().parent
        if holds_no_files(folder):
            return f"{folder} is a pseudo filesystem (like /proc) that holds no database; name a file elsewhere"
        free = free_bytes(folder)
        return None if free is None or free > 64 * 1024 else f"the disk holding it is full ({free // 1024} KiB free)"

    @property
    def safe_url(self) -> str:
        """The URL with any password masked, for messages and logs."""
        return make_url(self.url).render_as_string(hide_password=True)

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: commits when the block succeeds, rolls back when it raises."""
        session = self.session_factory()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def close(self) -> None:
        self.engine.dispose()
