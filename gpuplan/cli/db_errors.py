"""What is wrong with a database that fails in the middle of a command, said in one line (exit 2).

A database file that is damaged, read-only or immutable (`chattr +i`, which even root cannot write) opens and
reads fine, then fails at the first write or at a damaged page: that surfaced as `unexpected OperationalError`.
The cause is the file the user pointed gpuplan at, not a bug, so it is named with what to do about it."""

from __future__ import annotations

import sys

# sqlite3's message (lower-cased) -> what it means for the user.
SQLITE_PROBLEMS = {
    "readonly database": "is read-only (the file, its folder, or an immutable attribute): gpuplan writes its books "
                         "there; make it writable or point --db at another database",
    "malformed": "is damaged (database disk image is malformed): restore it from a backup or point --db elsewhere",
    "not a database": "is not a gpuplan database (file is not a database): check --db / GPUPLAN_DB",
    "disk i/o error": "cannot be read or written (disk I/O error): check the disk and the file",
    "database or disk is full": "cannot grow: the disk is full",
    "unable to open database": "cannot be opened: check that the path and its folder exist and are readable",
}


def database_problem(exc: BaseException) -> str | None:
    """One line for an SQLAlchemy database error whose cause is the database itself; None for anything else."""
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is None or not isinstance(exc, sa_exc.DBAPIError):
        return None
    reason = str(exc.orig).strip() if exc.orig is not None else str(exc)
    lowered = reason.lower()
    notes = "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))  # e.g. what a launch undid
    for needle, meaning in SQLITE_PROBLEMS.items():
        if needle in lowered:
            return f"the database {meaning}{notes}"
    if isinstance(exc, sa_exc.OperationalError):
        return f"the database cannot be used: {reason.splitlines()[0] if reason else type(exc.orig).__name__}{notes}"
    return None
