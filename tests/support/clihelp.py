"""Helpers for running the CLI as a user would: in-process with CliRunner, or as a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from click.testing import CliRunner

from gpuplan.cli import cli


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """Invoke `gpuplan ARGS` in-process; stdout and stderr are kept apart as a terminal would."""
    runner = CliRunner()
    result = runner.invoke(cli, list(args), input=input, env=env, catch_exceptions=False)
    return Result(result.exit_code, result.stdout, result.stderr)


def run_subprocess(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
                   input: str | None = None) -> Result:
    """Run `python -m gpuplan ARGS` in a child process with the test's environment (plus `env`)."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "gpuplan", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, input=input)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@contextlib.contextmanager
def interruptible_children() -> Iterator[None]:
    """Children started inside this block can be interrupted with SIGINT, however this test process was started.

    A shell starts a background job (`make test &`) with SIGINT ignored and exec keeps that disposition, so a
    child would silently ignore the test's SIGINT and the test would time out. A handled signal is reset to its
    default action by exec instead: hold Python's own handler while the children start.
    """
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
