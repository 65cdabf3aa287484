"""Faults that used to lose money or data silently (issue 38, class 4), through the CLI as separate processes:
a full disk (a small tmpfs mounted for the test), a damaged page in the SQLite file, an in-memory database.
Nothing may run that the books do not hold, and nothing is recorded into a damaged file."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuplan.jobs.processes import pid_alive

from support.clihelp import run_subprocess

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


@pytest.fixture
def marker() -> Iterator[str]:
    seconds = str(random.randint(100_000, 999_999))
    yield seconds
    for pid in sleeping(seconds):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def sleeping(seconds: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", seconds.encode()] and pid_alive(int(cmdline.parent.name)):
            found.append(int(cmdline.parent.name))
    return found


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
