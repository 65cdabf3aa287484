"""Hostile and broken inputs through the CLI: one `error:` line and exit 2, quickly, nothing recorded; text from
the books made inert on the terminal; run folders private whatever the umask."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.clihelp import Result, run_cli, run_subprocess
from support.fuzzing import alias_bomb

HEAD = "name: hostile\nruntime: process\ncommand: echo hi\n"



def one_error(result: Result, *expected: str) -> str:
    """The result is exit 2 with exactly one `error:` line (no traceback), holding every `expected` text."""
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


SPECS = {
    "alias bomb": (alias_bomb(HEAD), "expands to over 100,000 values"),
    "deep nesting": (HEAD + "labels: " + "[" * 3000 + "]" * 3000 + "\n", "nested deeper than 64 levels"),
    "recursive anchor": (HEAD + "labels: &a {x: *a}\n", "recursive anchor"),
    "10 MB": (HEAD + "labels:\n" + "".join(f"  k{i}: v\n" for i in range(1_100_000)), "over 256 KB"),
    "NUL in command": (HEAD.replace("echo hi", '"echo \\0hi"'), "NUL character"),
    "NUL in env": (HEAD + 'env: {A: "x\\0"}\n', "'env.A': contains a NUL"),
    "far deadline": (HEAD + "limits: {deadline: '9999-12-31T23:59:59-12:00'}\n", "more than 100 years away"),
    "tiny max_hours": (HEAD + "limits: {max_hours: 1e-300}\n", "limits.max_hours"),
}


@pytest.mark.parametrize("case", sorted(SPECS))
def test_hostile_specs_are_refused_by_launch_plan_and_schedule(tmp_path: Path, case: str) -> None:
    text, expected = SPECS[case]
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    for argv in (["launch", str(spec), "-y", "--detach"], ["launch", str(spec), "--dry-run"], ["plan", str(spec)],
                 ["schedule", "add", str(spec), "--cron", "0 * * * *"]):
        started = time.process_time()  # CPU time of this process (the CLI runs in-process): neighbours don't count
        one_error(run_cli(*argv), expected)
        assert time.process_time() - started < 2.0, argv
    assert run_cli("runs", "--json").json() == [] and run_cli("schedule", "list", "--json").json() == []


def test_a_spec_at_dev_zero_is_refused_through_the_cli() -> None:
    started = time.monotonic()
    one_error(run_subprocess("launch", "/dev/zero", "--dry-run"), "character device, not a regular file")
    assert time.monotonic() - started < 10  # the whole process, start-up included, on a loaded machine


def test_bad_option_values_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    one_error(run_cli("estimate", "--model-config", "/dev/zero", "--gpu", "H100", "--tokens", "1B"), "/dev/zero")
    one_error(run_cli("estimate", "--module", ":", "--gpu", "H100", "--tokens", "1B"), "pkg.mod:factory")
    one_error(run_cli("estimate", "--module", "json:dumps", "--gpu", "H100", "--tokens", "1B"),
              "calling dumps() failed: TypeError")
    one_error(run_cli("--db", "sqlite:////proc/self/x.db", "runs"), "cannot create the database file")
    one_error(run_cli("budget", "set", "tiny", "--amount", "1e-400", "--period", "total"), "at least $0.000001")
    one_error(run_cli("scheduler", "tick", "--at", "0001-01-01"), "within 100 years")
    one_error(run_cli("scheduler", "tick", "--at", "9999-12-31"), "within 100 years")
    one_error(run_cli("status", "r" * 50_000), "no run")
    one_error(run_cli("stop", "x\x00y"), "NUL character")


def test_run_refs_match_percent_and_underscore_literally() -> None:
    from gpuplan.store.db import Store
    from gpuplan.store.models import Run

    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        s.add(Run(id="r-5bc2d5ae81", name="victim", provider="local", spec_text="", spec_hash="",
                  state="succeeded"))
    store.close()
    for ref in ("%e81", "r-5bc2d5a_81", "r-%", "_"):
        one_error(run_cli("stop", ref), "no run")
    assert run_cli("status", "r-5bc2d5a", "--json").json()["run_id"] == "r-5bc2d5ae81"


def test_terminal_escapes_in_the_books_are_shown_not_obeyed() -> None:
    """A run written by someone else on a shared database (or an older gpuplan) with escapes in its name and reason:
    `runs` and `status` show them as text."""
    from gpuplan.store.db import Store
    from gpuplan.store.models import Run

    name = "evil\x1b]0;owned\x07\x1b[2J\x9b31m[red]x[/red]"
    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        s.add(Run(id="r-0000e5c4be", name=name, provider="local", spec_text="", spec_hash="", state="failed",
                  state_reason="reason\x1b[8mhidden"))
    store.close()
    for argv in (["runs"], ["status", "r-0000e5c4be"]):
        out = run_subprocess(*argv)
        assert out.exit_code == 0, out.stderr
        assert not any(c in out.stdout for c in "\x1b\x07\x9b"), repr(out.stdout)
        assert "\\x1b]0;owned\\x07" in out.stdout and "[red]x[/red]" in out.stdout.replace("\n", "")
    assert "\\x1b[8mhidden" in run_subprocess("status", "r-0000e5c4be").stdout


def test_a_damaged_or_immutable_database_is_named_not_a_crash(tmp_path: Path) -> None:
    good = tmp_path / "good.db"
    assert run_cli("--db", f"sqlite:///{good}", "runs").exit_code == 0
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(good.read_bytes()[:4096])
    one_error(run_cli("--db", f"sqlite:///{truncated}", "runs"), "malformed")
    frozen = tmp_path / "frozen.db"
    shutil.copy(good, frozen)
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(frozen)], capture_output=True).returncode != 0:
        pytest.skip("no immutable attribute on this filesystem")
    try:
        one_error(run_cli("--db", f"sqlite:///{frozen}", "budget", "set", "b", "--amount", "5", "--period", "total"),
                  "read-only")
    finally:
        subprocess.run([chattr, "-i", str(frozen)], capture_output=True)


@pytest.mark.timeout(120)
def test_run_folder_files_are_private_under_umask_000(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: private\nruntime: process\n"
                    "command: 'echo secret > \"$GPUPLAN_RUN_DIR/out.txt\"; mkdir -p \"$GPUPLAN_RUN_DIR/ck\"'\n")
    proc = subprocess.run([sys.executable, "-m", "gpuplan", "launch", str(spec), "-y", "--json"],
                          capture_output=True, text=True, umask=0, timeout=100)
    assert proc.returncode == 0, proc.stderr
    import json

    run_dir = Path(json.loads(proc.stdout)["run_dir"])
    found = [run_dir, *run_dir.rglob("*")]
    assert any(p.name == "out.txt" for p in found) and any(p.name == "job.log" for p in found)
    loose = [(str(p), oct(p.stat().st_mode)) for p in found if stat.S_IMODE(p.stat().st_mode) & 0o077]
    assert loose == []
