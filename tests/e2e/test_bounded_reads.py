"""Every file gpuplan reads is read bounded (issue 38, class 5), through the CLI as separate processes:
special files are refused at once (one line, exit 2; the subprocess timeout catches a read that blocks), and a
job's huge log or metrics line costs a bounded amount of memory (the child's peak RSS, from wait4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.clihelp import run_cli, run_subprocess

RSS_LIMIT_KB = 400 * 1024  # the CLI itself needs ~100 MB; reading 1 GB whole needs 1-2 GB


@pytest.fixture
def fifo(tmp_path: Path) -> str:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return str(path)


SPECIAL = ["/dev/zero", "/dev/urandom", "fifo", "/proc/kmsg", "/proc/self/environ", "folder"]


def special(name: str, tmp_path: Path, fifo: str) -> str:
    return {"fifo": fifo, "folder": str(tmp_path)}.get(name, name)


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", SPECIAL)
def test_special_files_are_refused_at_once_everywhere(tmp_path: Path, fifo: str, name: str) -> None:
    """In-process (a blocked read fails by the timeout), and the FIFO once more as a separate process."""
    path = special(name, tmp_path, fifo)
    cases = [
        (["launch", path, "--dry-run"], {}),
        (["schedule", "add", path, "--cron", "0 * * * *"], {}),
        (["runs"], {"GPUPLAN_CONFIG": path}),
        (["estimate", "--model-config", path, "--gpu", "H100", "--tokens", "1B"], {}),
    ]
    for argv, env in cases:
        out = run_cli(*argv, env=env)
        assert out.exit_code == 2, (argv, env, out.stderr)
        one_error_line(out.stderr)
    if name == "fifo":
        for argv, env in cases:
            out = run_subprocess(*argv, env=env, timeout=30)
            assert out.exit_code == 2, (argv, env, out.stderr)
            one_error_line(out.stderr)


def test_a_huge_config_file_is_refused_without_parsing_it(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("# nothing but comments\n" * 500_000)  # ~11 MB
    out = run_subprocess("runs", env={"GPUPLAN_CONFIG": str(config)})
    assert out.exit_code == 2 and "over 256 KB" in one_error_line(out.stderr), out.stderr


def peak_rss_kb(*argv: str, env: dict[str, str] | None = None) -> tuple[int, int]:
    """(exit status, peak resident set in KB) of `gpuplan ARGV` run as a child process."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", *argv], env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_maxrss
        assert time.monotonic() < deadline, argv
        time.sleep(0.05)


def test_a_huge_metrics_line_and_log_cost_bounded_memory(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: big\nruntime: process\ncommand: 'true'\n")
    out = run_subprocess("launch", str(spec), "-y", "--json")
    assert out.exit_code == 0, out.stderr
    run_id = out.json()["run_id"]
    run_dir = Path(run_subprocess("status", run_id, "--json").json()["run_dir"])
    # 1 GB sparse files (no disk used): a metrics "line" without a newline, and a log.
    with open(run_dir / "metrics.jsonl", "w") as fh:
        fh.write(json.dumps({"step": 1, "tokens": 10, "time": time.time()}) + "\n" + '{"step": 2, "x": "')
    os.truncate(run_dir / "metrics.jsonl", 1 << 30)
    log = run_dir / "node-0" / "job.log"
    os.truncate(log, 1 << 30)
    for argv in (["status", run_id, "--json"], ["runs", "--json"]):
        code, rss = peak_rss_kb(*argv)
        assert code == 0 and rss < RSS_LIMIT_KB, (argv, code, rss)
    code, rss = peak_rss_kb("logs", run_id)
    assert code == 0 and rss < RSS_LIMIT_KB, (code, rss)
