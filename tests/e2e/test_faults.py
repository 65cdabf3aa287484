"""Faults that used to lose money or data silently (issue 38, class 4), through the CLI as separate processes:
a full disk (a small tmpfs mounted for the test), a damaged page in the SQLite file, an in-memory database.
Nothing may run that the books do not hold, and nothing is recorded into a damaged file."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.clihelp import run_subprocess
from support.sleepers import sleeping

PRICE = {"GPUPLAN_LOCAL_PRICE_PER_HOUR": "3600"}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs of the test's own (root only: mount(8))."""
    folder = tmp_path / "small"
    folder.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs",
                                            str(folder)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path) -> Path:
    """Fill the filesystem of `folder` to the last byte; returns the filler file."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        for chunk in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * chunk)
    finally:
        os.close(fd)
    return filler


def job(tmp_path: Path, seconds: str) -> Path:
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: fault\nruntime: process\ncommand: sleep {seconds}\n")
    return spec


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: ") and "Traceback" not in stderr, stderr
    return lines[-1]


def test_an_in_memory_database_refuses_a_launch(tmp_path: Path, marker: str) -> None:
    out = run_subprocess("launch", str(job(tmp_path, marker)), "-y", "--detach",
                         env={**PRICE, "GPUPLAN_DB": "sqlite://"})
    assert out.exit_code == 2, out.stderr
    assert "in memory" in one_error_line(out.stderr)
    time.sleep(0.5)
    assert sleeping(marker) == []


def test_a_damaged_page_refuses_a_launch_and_records_nothing(tmp_path: Path, marker: str) -> None:
    db = Path(os.environ["GPUPLAN_DB"].removeprefix("sqlite:///"))
    assert run_subprocess("budget", "set", "m", "--amount", "100", "--period", "month").exit_code == 0
    assert run_subprocess("runs").exit_code == 0  # closes cleanly: everything checkpointed into the file
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn:  # a page a launch does not read: it went unnoticed
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'schedule_fires'").fetchone()[0]
    with open(db, "r+b") as fh:  # a page of random bytes, as a bad sector leaves it
        fh.seek(page * (root - 1))
        fh.write(random.Random(7).randbytes(page))
    before = db.read_bytes()
    out = run_subprocess("launch", str(job(tmp_path, marker)), "-y", "--detach", env=PRICE)
    assert out.exit_code == 2, out.stderr
    assert "damaged" in one_error_line(out.stderr)
    time.sleep(0.5)
    assert sleeping(marker) == [] and db.read_bytes() == before


@pytest.mark.parametrize("where", ["database", "runs"])
def test_a_full_disk_refuses_a_launch_before_recording_it(tmp_path: Path, small_disk: Path, marker: str,
                                                          where: str, db_url: str) -> None:
    """The database's disk (SQLite) or the run folders' disk (SQLite and PostgreSQL) full: refused, nothing
    recorded, nothing started."""
    env = {**PRICE, "GPUPLAN_DB": db_url}
    if where == "database":
        if not db_url.startswith("sqlite"):
            pytest.skip("a PostgreSQL server's disk is the server's")
        env["GPUPLAN_DB"] = f"sqlite:///{small_disk / 'gpuplan.db'}"
    else:
        env["GPUPLAN_HOME"] = str(small_disk / "home")
    assert run_subprocess("runs", env=env).exit_code == 0
    filler = fill(small_disk)
    out = run_subprocess("launch", str(job(tmp_path, marker)), "-y", "--detach", env=env)
    assert out.exit_code == 2, out.stderr
    assert "KiB free" in one_error_line(out.stderr), out.stderr
    time.sleep(0.5)
    assert sleeping(marker) == []
    filler.unlink()
    assert run_subprocess("runs", "--json", env=env).json() == []


def test_a_disk_filling_up_during_the_launch_leaves_no_job_running_unbooked(tmp_path: Path, small_disk: Path,
                                                                              marker: str) -> None:
    """The disk fills between the job's start and the recording of its machine: the job is ended, and the next
    `status` books the seconds it ran."""
    env = {**os.environ, **PRICE, "GPUPLAN_DB": f"sqlite:///{small_disk / 'gpuplan.db'}",
           "GPUPLAN_TEST_PAUSE_AT": "launched", "GPUPLAN_TEST_PAUSE_FILE": str(tmp_path / "paused"),
           "GPUPLAN_TEST_PAUSE_RESUME": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "launch", str(job(tmp_path, marker)), "-y",
                             "--detach"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "paused").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        while not sleeping(marker):
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.05)
        filler = fill(small_disk)
        (tmp_path / "paused").unlink()
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, stderr
    line = one_error_line(stderr)
    assert "disk is full" in line and "terminated" in line, line
    assert sleeping(marker) == []
    filler.unlink()
    del env["GPUPLAN_TEST_PAUSE_AT"]
    runs = run_subprocess("runs", "--json", env=env).json()
    assert len(runs) == 1
    status = run_subprocess("status", runs[0]["run_id"], "--json", env=env).json()
    assert status["state"] not in ("pending", "provisioning", "running"), status
    assert float(status["cost_usd"]) > 0


def test_a_command_execve_would_refuse_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    """Issue 38, class 11: a 200,000-character command was recorded, then failed at exec (E2BIG)."""
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: long\nruntime: process\ncommand: \"echo {'x' * 200_000}\"\n")
    out = run_subprocess("launch", str(spec), "-y", "--detach", env=PRICE)
    assert out.exit_code == 2, out.stderr
    assert "Argument list too long" in one_error_line(out.stderr)
    assert run_subprocess("runs", "--json").json() == []


def _killed_mid_write(tmp_path: Path, marker: str, env: dict[str, str]) -> None:
    """A `gpuplan launch` SIGKILLed with its run written and not yet closed (pause point `recorded`): the
    database is left as a process that never closed it leaves it."""
    paused = tmp_path / "paused"
    full = {**os.environ, **PRICE, **env, "GPUPLAN_TEST_PAUSE_AT": "recorded", "GPUPLAN_TEST_PAUSE_FILE": str(paused)}
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "launch", str(job(tmp_path, marker)), "-y",
                             "--detach"], env=full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not paused.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_a_database_left_damaged_by_a_killed_process_is_refused_at_open_untouched(tmp_path: Path,
                                                                                  marker: str) -> None:
    """Issue 38, class 4, at open: a process killed mid-write leaves the -wal; a page of the file is damaged (a bad
    sector, the crash): the next command of any kind refuses in one line naming the file, exit 2, and writes
    nothing into it (before, `runs` exited 0 and a later write landed in the damaged file)."""
    db = Path(os.environ["GPUPLAN_DB"].removeprefix("sqlite:///"))
    wal = db.with_name(db.name + "-wal")
    assert run_subprocess("budget", "set", "m", "--amount", "100", "--period", "month").exit_code == 0
    _killed_mid_write(tmp_path, marker, {})
    assert wal.exists() and wal.stat().st_size > 0  # the killed process never closed the database
    import sqlite3

    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'schedule_fires'").fetchone()[0]
    with open(db, "r+b") as fh:
        fh.seek(page * (root - 1))
        fh.write(random.Random(7).randbytes(page))
    before = (db.read_bytes(), wal.read_bytes())
    for argv in (["runs"], ["budget", "list"], ["launch", str(job(tmp_path, marker)), "-y", "--detach"]):
        out = run_subprocess(*argv, env=PRICE)
        assert out.exit_code == 2, (argv, out.stderr)
        line = one_error_line(out.stderr)
        assert str(db) in line and "damaged" in line and "restore it from a backup" in line, line
        assert (db.read_bytes(), wal.read_bytes()) == before
    time.sleep(0.5)
    assert sleeping(marker) == []


def test_a_sound_database_left_by_a_killed_process_is_accepted(tmp_path: Path, marker: str, db_url: str) -> None:
    """The same kill -9 without damage: the leftover WAL is checked and accepted, the killed launch's run is
    there, and the database is closed cleanly afterwards (no WAL left, so the next command checks nothing).
    PostgreSQL: the server recovers its own WAL; the next command simply works."""
    env = {"GPUPLAN_DB": db_url}
    _killed_mid_write(tmp_path, marker, env)
    if db_url.startswith("sqlite"):
        wal = Path(db_url.removeprefix("sqlite:///") + "-wal")
        assert wal.exists() and wal.stat().st_size > 0
    out = run_subprocess("runs", "--json", env=env)
    assert out.exit_code == 0, out.stderr
    assert len(out.json()) == 1  # the run the killed launch recorded
    if db_url.startswith("sqlite"):
        assert not wal.exists()
