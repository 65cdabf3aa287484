"""When a SQLite database counts as left open by a process that stopped without closing it (gpuplan.store.unclean):
a non-empty -wal that no live process holds. Real SQLite, real processes."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from gpuplan.store.unclean import left_open

WRITE_AND_DIE = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
conn.execute("INSERT INTO t VALUES (1)")
conn.commit()
os._exit(0)  # no close: what kill -9 leaves
"""


def test_a_database_closed_cleanly_or_in_use_is_not_left_open(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
        assert not left_open(db)  # held by this very process (its lock is in /proc/locks too)
    assert not left_open(db)  # the last close removed the -wal


def test_a_database_whose_writer_died_without_closing_is_left_open(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    subprocess.run([sys.executable, "-c", WRITE_AND_DIE, str(db)], check=True)
    assert (tmp_path / "g.db-wal").stat().st_size > 0
    assert left_open(db)
    with contextlib.closing(sqlite3.connect(db)) as conn:  # another process opens it: in use again
        conn.execute("SELECT count(*) FROM t").fetchone()
        assert not left_open(db)
