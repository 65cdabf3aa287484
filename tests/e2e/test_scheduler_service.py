"""Issue 35, item 6: the scheduler says it started and what it waits for, `tick` defaults to now, and
`scheduler install` gives a systemd user unit or a cron line that really runs it — all in child processes."""

from __future__ import annotations

import datetime as dt
import os
import shlex
import subprocess
from pathlib import Path

from support.clihelp import run_subprocess

JOB = """\
name: nightly-hello
runtime: process
command: echo hello
schedule:
  cron: "0 2 * * *"
"""


def _add_schedule(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(JOB)
    added = run_subprocess("schedule", "add", str(spec), "--name", "nightly")
    assert added.exit_code == 0, added.stderr


def test_run_prints_a_start_line_and_a_status_line_per_pass(tmp_path: Path) -> None:
    _add_schedule(tmp_path)
    out = run_subprocess("scheduler", "run", "--once")
    assert out.exit_code == 0, out.stderr
    lines = out.stderr.splitlines()
    start = next(line for line in lines if "scheduler started" in line)
    assert os.environ["GPUPLAN_DB"] in start and "1 schedule(s) active; next: nightly at " in start
    assert any("pass at " in line and "next: nightly at" in line and "02:00 UTC" in line for line in lines), lines


def test_tick_defaults_to_now() -> None:
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    out = run_subprocess("scheduler", "tick", "--json")
    assert out.exit_code == 0, out.stderr
    at = dt.datetime.fromisoformat(out.json()["at"].replace("Z", "+00:00"))
    assert before <= at <= dt.datetime.now(dt.timezone.utc)


def test_install_prints_and_installs_a_systemd_user_unit(tmp_path: Path) -> None:
    printed = run_subprocess("scheduler", "install")
    assert printed.exit_code == 0, printed.stderr
    unit = printed.stdout
    assert "[Service]" in unit and "WantedBy=default.target" in unit and "Restart=on-failure" in unit
    assert f'Environment="GPUPLAN_DB={os.environ["GPUPLAN_DB"]}"' in unit
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert '"scheduler" "run" "--interval" "30"' in exec_start
    assert "systemctl --user enable --now gpuplan-scheduler.service" in printed.stderr
    config_home = Path(os.environ["XDG_CONFIG_HOME"])
    installed = run_subprocess("scheduler", "install", "--install")
    assert installed.exit_code == 0, installed.stderr
    assert (config_home / "systemd/user/gpuplan-scheduler.service").read_text() == unit


def test_the_cron_line_runs_a_scheduler_pass(tmp_path: Path) -> None:
    _add_schedule(tmp_path)
    out = run_subprocess("scheduler", "install", "--cron")
    assert out.exit_code == 0, out.stderr
    line = out.stdout.strip()
    fields = line.split(" ", 5)
    assert fields[:5] == ["*"] * 5 and "scheduler run --once" in fields[5]
    # What cron would run (/bin/sh -c, `\%` back to `%`), with nothing of this shell's environment but PATH.
    command = fields[5].replace("\\%", "%")
    subprocess.run(["/bin/sh", "-c", command], env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, check=True,
                   timeout=120)
    log = Path(os.environ["GPUPLAN_HOME"]) / "scheduler.log"
    assert "next: nightly at" in log.read_text(), shlex.quote(command)
