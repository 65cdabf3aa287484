"""The CLI's promises: fast help, one-line errors with exit 2, --version, --db, lazy imports."""

from __future__ import annotations

import subprocess
import sys

from gpuplan import __version__

from support.clihelp import run_cli, run_subprocess

HEAVY = {"pandas", "boto3", "botocore", "google", "torch", "sqlalchemy", "alembic", "numpy",
         "starlette", "uvicorn", "jinja2", "markupsafe", "selenium"}  # the web stack: `gpuplan ui` only


def test_help_lists_commands() -> None:
    result = run_cli("--help")
    assert result.exit_code == 0
    assert "Commands:" in result.stdout
    assert "db" in result.stdout


def test_version() -> None:
    result = run_cli("--version")
    assert result.exit_code == 0
    assert __version__ in result.stdout


def test_unknown_command_is_one_line_exit_2() -> None:
    result = run_cli("no-such-command")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""


def test_bad_option_is_one_line_exit_2() -> None:
    result = run_cli("db", "current", "--no-such-flag")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "no-such-flag" in result.stderr


def test_bad_db_url_is_user_error() -> None:
    result = run_cli("--db", "not a url", "db", "current")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: not a database URL")
    assert "Traceback" not in result.stderr


def test_unopenable_database_is_one_line_without_traceback(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run_subprocess("--db", f"sqlite:///{blocker}/sub/x.db", "db", "upgrade")
    assert result.exit_code != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")
    verbose = run_subprocess("-v", "--db", f"sqlite:///{blocker}/sub/x.db", "db", "upgrade")
    assert "Traceback" in verbose.stderr


def test_help_imports_nothing_heavy() -> None:
    """`gpuplan --help` must import click and gpuplan's own modules only."""
    code = (
        "import sys, runpy\n"
        "sys.argv = ['gpuplan', '--help']\n"
        "try:\n    runpy.run_module('gpuplan', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(out.split())
    assert not (loaded & HEAVY), f"heavy modules imported by --help: {loaded & HEAVY}"
    assert "click" in loaded


def test_every_registered_command_has_help() -> None:
    from gpuplan.cli import COMMANDS

    for name in COMMANDS:
        result = run_cli(name, "--help")
        assert result.exit_code == 0, (name, result.stderr)
        assert "Usage:" in result.stdout
