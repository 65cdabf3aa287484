"""Named leases with an expiry, in the database: at most one holder at a time, on SQLite and PostgreSQL.

A scheduler holds the `scheduler` lease while it works and renews it every pass; a second scheduler waits
until the lease expires (its holder died) before taking over. The claim is a single conditional UPDATE,
or an INSERT that the primary key makes exclusive, so no two processes can both win.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import delete, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpuplan.store.models import Lease


def acquire(session: Session, name: str, holder: str, ttl: dt.timedelta, now: dt.datetime) -> bool:
    """Take or renew lease `name` for `holder` until now + ttl; False if someone else holds it unexpired.

    Commits on its own (a lease is only meaningful once other processes can see it).
    """
    expires = now + ttl
    result = session.execute(
        update(Lease)
        .where(Lease.name == name, (Lease.holder == holder) | (Lease.expires_at <= now))
        .values(holder=holder, expires_at=expires, acquired_at=now)
        .execution_options(synchronize_session=False)
    )
    # An UPDATE's result is a CursorResult (it has the row count); Session.execute is typed as the plain Result.
    if not isinstance(result, CursorResult):
        raise TypeError(f"an UPDATE answered {type(result).__name__}, not a CursorResult")
    if result.rowcount:
        session.commit()
        return True
    session.rollback()
    try:
        session.add(Lease(name=name, holder=holder, expires_at=expires, acquired_at=now))
        session.commit()
        return True
    except IntegrityError:
        session.rollback()
        return False


def release(session: Session, name: str, holder: str) -> None:
    """Give the lease up (on a clean exit) so another process need not wait for the expiry."""
    session.execute(delete(Lease).where(Lease.name == name, Lease.holder == holder))
    session.commit()
