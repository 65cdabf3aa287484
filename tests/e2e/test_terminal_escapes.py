"""Text from the books reaches a real terminal inert in the five places that printed it raw (issue 38, class 9):
`budget set NAME`'s echo, `schedule add --name`, `schedule show`, `report --format markdown/csv`, and the
"caps: ... (budget '...')" line of `launch` and `status`. Each runs as a separate process with its stdout and
stderr on a pseudo-terminal, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

EVIL = "x\x1b]0;owned\x07\x1b[2J\x9b31m"
RAW = ("\x1b]", "\x07", "\x1b[2J", "\x9b")


def on_terminal(*argv: str, env: dict[str, str]) -> tuple[int, str]:
    """Run `gpuplan ARGV` with stdout and stderr on a pty; (exit status, everything it wrote)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", *argv], stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, env={**os.environ, **env, "COLUMNS": "300"})
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        assert ready, "no output for a minute"
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=60), b"".join(chunks).decode(errors="replace")


def assert_inert(text: str) -> None:
    assert not any(raw in text for raw in RAW), repr(text)
    assert "\\x1b]0;owned\\x07" in text, repr(text)


@pytest.mark.timeout(240)
def test_names_with_escapes_are_shown_not_obeyed_on_a_terminal(tmp_path: Path, db_url: str) -> None:
    env = {"GPUPLAN_DB": db_url, "GPUPLAN_LOCAL_PRICE_PER_HOUR": "36"}
    code, text = on_terminal("budget", "set", EVIL, "--amount", "50", "--period", "month", "--project", EVIL,
                             env=env)
    assert code == 0, text
    assert_inert(text)
    spec = tmp_path / "job.yaml"  # the project holds the same escapes, written as YAML escapes
    spec.write_text('name: escapes\nruntime: process\nproject: "x\\e]0;owned\\a\\e[2J\\x9b31m"\n'
                    "command: 'true'\nworkload: {tokens: 360, throughput: 1}\n")
    code, text = on_terminal("schedule", "add", str(spec), "--name", EVIL, "--cron", "0 3 * * *", env=env)
    if code == 2:  # schedule names may be refused outright: then inert in the refusal
        assert_inert(text)
        name = "nightly"
        code, text = on_terminal("schedule", "add", str(spec), "--name", name, "--cron", "0 3 * * *", env=env)
    else:
        name = EVIL
        assert_inert(text)
    assert code == 0, text
    code, text = on_terminal("schedule", "show", name, env=env)
    assert code == 0, text
    if name == EVIL:
        assert_inert(text)
    code, text = on_terminal("launch", str(spec), "-y", "--detach", env=env)
    assert code == 0, text
    assert "caps:" in text, text
    assert_inert(text)
    code, text = on_terminal("runs", "--json", env=env)
    run_id = text[text.index('"run_id": "') + 11:].split('"', 1)[0]
    code, text = on_terminal("status", run_id, env=env)
    assert code == 0 and "caps:" in text, text
    assert_inert(text)
    for fmt in ("markdown", "csv"):
        code, text = on_terminal("report", "--format", fmt, "--by", "project", env=env)
        assert code == 0, text
        assert_inert(text)
