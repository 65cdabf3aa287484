"""A SAVEPOINT that really is nested, on PostgreSQL and on SQLite: for an insert allowed to lose a race.

When a unique key refuses an insert, the caller must undo just that insert and carry on with the rest of its
transaction. PostgreSQL aborts the whole transaction on the error unless the insert ran under a savepoint, so
one is needed. On SQLite, Python's sqlite3 module (legacy transaction control, which SQLAlchemy uses) opens a
transaction only before INSERT/UPDATE/DELETE: a SAVEPOINT issued first would itself become the outermost
transaction, and releasing it would COMMIT, splitting the caller's unit of work in two. `savepoint()` opens the
transaction (a plain deferred BEGIN, as sqlite3 itself would) before the SAVEPOINT so it nests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sqlalchemy.orm import Session, SessionTransaction


@contextlib.contextmanager
def savepoint(session: Session) -> Iterator[SessionTransaction]:
    """`session.begin_nested()`, with the outer transaction opened first on SQLite (see the module doc).

    Rolls back to the savepoint (only) when the block raises, and re-raises.
    """
    connection = session.connection()
    if connection.dialect.name == "sqlite":
        dbapi = connection.connection.dbapi_connection
        if dbapi is not None and not getattr(dbapi, "in_transaction", True):
            connection.exec_driver_sql("BEGIN")
    with session.begin_nested() as nested:
        yield nested
