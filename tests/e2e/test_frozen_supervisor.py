"""A frozen wrapper cannot overspend (issue 38, class 2): the cap is enforced by the watchdog (gpuplan.jobs.watchdog),
a process of its own, so a SIGSTOPped wrapper — a debugger, ^Z, a frozen cgroup — does not let the job run on.

The job ignores SIGTERM and leaves its process group; the wrapper is stopped as soon as it exists. Every process
of the job must be gone before the cap (grace included), the node's end recorded by then, and the books (what
`status` bills) equal to what ran: at most the cap at the price. On SQLite and PostgreSQL, through the CLI.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.jobs.processes import pid_alive

from support.clihelp import run_subprocess

CAP_HOURS = 0.003  # 10.8 s
PRICE = Decimal(3600)  # a dollar a second: the cap is worth $7.20


def wait_for(predicate, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


@pytest.mark.timeout(120)
def test_a_stopped_wrapper_does_not_let_the_job_run_past_its_cap(tmp_path: Path, db_url: str) -> None:
    env = {"GPUPLAN_DB": db_url, "GPUPLAN_LOCAL_PRICE_PER_HOUR": str(PRICE)}
    spec = tmp_path / "job.yaml"
    command = "trap '' TERM; setsid sh -c \"trap '' TERM; sleep 300\" & sleep 300; sleep 300"
    spec.write_text(f"name: frozen\nruntime: process\ncommand: {json.dumps(command)}\n"
                    f"limits: {{max_hours: {CAP_HOURS}}}\n")
    # The wrapper is stopped as soon as its job runs, from the run folder, while `launch` is still returning (on a
    # busy machine a CLI call takes seconds, a good part of the cap).
    launch = subprocess.Popen([sys.executable, "-m", "gpuplan", "launch", str(spec), "-y", "--detach", "--json"],
                              env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = Path(os.environ["GPUPLAN_HOME"]) / "runs"
    node = wait_for(lambda: next((n for n in runs.glob("*/node-0") if (n / "job.pid").exists()), None))
    wrapper = int((node / "wrapper.pid").read_text().strip())
    os.kill(wrapper, signal.SIGSTOP)
    out, err = launch.communicate(timeout=60)
    assert launch.returncode == 0, err
    run_id = json.loads(out)["run_id"]
    try:
        started = dt.datetime.fromisoformat((node / "started_at").read_text().strip()).timestamp()
        cap_at = started + CAP_HOURS * 3600
        wait_for(lambda: (node / "exit.json").exists(), timeout=CAP_HOURS * 3600 + 15)
        seen_at = time.time()
        record = json.loads((node / "exit.json").read_text())
        assert record["reason"] == "max_hours", record
        ended = dt.datetime.fromisoformat(record["ended_at"]).timestamp()
        assert ended <= cap_at, f"recorded end {ended - cap_at:+.2f} s after the cap"
        containment = json.loads((node / "containment.json").read_text())
        if containment["kind"] == "cgroup":
            assert not Path(containment["path"], "cgroup.procs").exists() or \
                Path(containment["path"], "cgroup.procs").read_text().split() == []
        job = int((node / "job.pid").read_text())
        assert not pid_alive(job)
        assert seen_at <= cap_at + 3, "the end was recorded well after the cap"
        final = run_subprocess("status", run_id, "--json", env=env).json()
        assert final["state"] not in ("pending", "provisioning", "running"), final
        assert Decimal(str(final["cost_usd"])) <= PRICE * Decimal(str(CAP_HOURS)), final["cost_usd"]
    finally:
        if pid_alive(wrapper):
            os.kill(wrapper, signal.SIGKILL)
