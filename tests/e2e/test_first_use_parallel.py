"""Sixteen gpuplan processes started together on a database that does not exist yet (SQLite) or is empty
(PostgreSQL) all succeed: the first migrates under the migration lock, the others wait and find it done."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from gpuplan.store import migrate


@pytest.mark.timeout(300)
def test_sixteen_first_uses_at_once_all_succeed(db_url: str, tmp_path: Path) -> None:
    if db_url.startswith("sqlite"):
        db_url = f"sqlite:///{tmp_path / 'new' / 'gpuplan.db'}"  # not even its folder exists yet
    env = {**os.environ, "GPUPLAN_DB": db_url}
    procs = [subprocess.Popen([sys.executable, "-m", "gpuplan", "runs", "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(16)]
    results = [(p.wait(timeout=240), p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    failed = [(code, err) for code, _out, err in results if code != 0]
    assert failed == []
    assert all(out.strip() == "[]" for _code, out, _err in results)
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            assert list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars()) == [
                migrate.HEAD_REVISION]
    finally:
        engine.dispose()


@pytest.mark.timeout(120)
def test_a_first_use_killed_mid_upgrade_leaves_a_database_the_next_one_upgrades(db_url: str, tmp_path: Path) -> None:
    """Killed with every migration step done but not committed: nothing of it stays (SQLite used to keep the
    tables without the version row, and every later command failed with `table budgets already exists`)."""
    import signal
    import time

    marker = tmp_path / "paused"
    env = {**os.environ, "GPUPLAN_DB": db_url, "GPUPLAN_TEST_PAUSE_AT": "migrated",
           "GPUPLAN_TEST_PAUSE_FILE": str(marker)}
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "runs", "--json"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    env.pop("GPUPLAN_TEST_PAUSE_AT")
    after = subprocess.run([sys.executable, "-m", "gpuplan", "runs", "--json"], env=env, capture_output=True, text=True)
    assert after.returncode == 0 and after.stdout.strip() == "[]", after.stderr
