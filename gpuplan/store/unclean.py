"""Check a SQLite database at open when the last process that used it did not close it (issue 38, class 4).

Why: a process killed mid-write (kill -9, the OOM killer, a power cut) is when a database gets damaged, and a
damaged page may read fine until a later write lands in it: every command then goes on recording into a file that
is already lost. A full `PRAGMA quick_check` on every command would cost O(size) each time; after an unclean stop
it costs that once.

How an unclean stop is detected (no file of gpuplan's own, no write per command): gpuplan keeps SQLite in WAL mode
(gpuplan.store.db). When the last connection to a WAL database closes, SQLite checkpoints the write-ahead log into
the database and deletes the `-wal` file (https://www.sqlite.org/wal.html, "the WAL file ... is deleted when the
last connection to the database closes"). So a non-empty `-wal` that no live process holds is what a process that
never closed the database leaves. Whether a process holds it: every connection keeps a shared POSIX lock on the
`-shm` file's DMS ("dead man switch") byte while it is open (https://www.sqlite.org/walformat.html, "2.3.2.1 How
the shm file is used", the DMS lock); /proc/locks lists those locks by inode for every process (this one
included), so the probe opens no file descriptor (closing one would drop this process's own SQLite locks on the
same file: POSIX locks are per process). Where /proc/locks cannot be read (not Linux) a leftover WAL is checked
anyway: the same bounded check, a little more often.

A marker file that gpuplan writes at open and removes at a clean exit was the other choice: it costs a write (and
an fsync, to be trusted) on every command, needs one marker per process (a watcher and a `status` share the
file), and is left behind by the same kill -9 in the middle of a read-only command; SQLite's own files already
say it.

The check opens the file read-only (a read-only connection never checkpoints, so nothing is written into a damaged
file), runs `PRAGMA quick_check` (https://www.sqlite.org/pragma.html#pragma_quick_check) bounded by
QUICK_CHECK_SECONDS through SQLite's progress handler (past it the check is skipped with a warning; a launch still
checks fully, gpuplan.store.fitness), and refuses a damaged file with one line (UserError, exit 2).

PostgreSQL needs none of this: the server replays its own WAL after a crash before it accepts a connection, and a
damaged page is an error from the server on the query that reads it (with data checksums, `initdb -k`, also a
page that merely reads back wrong), which gpuplan reports as a database problem, exit 2; `pg_amcheck` is the
server-side equivalent of quick_check.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
import urllib.parse
from pathlib import Path

from gpuplan.errors import UserError

log = logging.getLogger(__name__)

QUICK_CHECK_SECONDS = 10.0
# How many SQLite virtual-machine steps between two looks at the clock (a few ms of work each).
_PROGRESS_STEPS = 20_000
_PROC_LOCKS = Path("/proc/locks")


def left_open(path: Path) -> bool:
    """True when the database at `path` was left by a process that did not close it: a non-empty `-wal` file
    that no live process holds (or may hold, where the system cannot say)."""
    wal = path.with_name(path.name + "-wal")
    try:
        if wal.stat().st_size == 0:
            return False
    except OSError:
        return False
    return not _held(path.with_name(path.name + "-shm"))


def _held(shm: Path) -> bool:
    """Does any process (this one included) hold a POSIX lock on the `-shm` file? False when it is gone, or when
    /proc/locks cannot be read (then the caller checks: cheap and bounded)."""
    try:
        info = shm.stat()
        listing = _PROC_LOCKS.read_text()
    except OSError:
        return False
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    # "1: POSIX  ADVISORY  READ 4242 fd:00:1234567 128 128" (proc(5): /proc/locks)
    return any(len(fields) > 5 and fields[5] == device and fields[1] in ("POSIX", "OFDLCK")
               for fields in (line.split() for line in listing.splitlines()))


def check_after_unclean_stop(path: Path, *, seconds: float = QUICK_CHECK_SECONDS) -> None:
    """Refuse (UserError) a database a process left open and that `quick_check` finds damaged; do nothing when it
    was closed cleanly or is in use."""
    if not left_open(path):
        return
    problem = _quick_check(path, seconds)
    if problem is not None:
        raise UserError(
            f"the database {path} was left open by a process that stopped without closing it, and it is damaged "
            f"({problem}); nothing was changed: keep a copy, then restore it from a backup or save what it holds "
            f"with `sqlite3 {path} .recover | sqlite3 recovered.db` and point GPUPLAN_DB at recovered.db")


def _quick_check(path: Path, seconds: float) -> str | None:
    """The first problem `PRAGMA quick_check` reports, or None (fine, or not finished in `seconds`)."""
    deadline = time.monotonic() + seconds
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)
        rows = [str(row[0]) for row in conn.execute("PRAGMA quick_check(3)")]
    except sqlite3.OperationalError as exc:
        if time.monotonic() > deadline and "interrupt" in str(exc):
            log.warning("the database %s was left open by a process that stopped without closing it; its "
                        "integrity check did not finish in %.0f s and was skipped (a launch checks it fully)",
                        path, seconds)
            return None
        return str(exc)
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        return str(exc)
    finally:
        conn.close()
    return None if rows == ["ok"] else (rows[0] if rows else "no answer from the integrity check")
