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


# Measured from a small middle process: a child spawned straight from the pytest worker (vfork + exec) starts its
# ru_maxrss at the worker's own high-water mark (Linux keeps the larger of the old mm's peak across exec), so a
# worker grown big by earlier tests reported its own size, not gpuplan's.
_MEASURE = """\
import os, sys
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.execv(sys.executable, [sys.executable, "-m", "gpuplan", *sys.argv[1:]])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss_kb(*argv: str, env: dict[str, str] | None = None) -> tuple[int, int]:
    """(exit status, peak resident set in KB) of `gpuplan ARGV` run as a child process."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *argv], env={**os.environ, **(env or {})},
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    return int(out[0]), int(out[1])


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
