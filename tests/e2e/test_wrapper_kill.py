"""`kill -9` of a local job's wrapper: the job cannot escape the books.

Its first process dies with the wrapper (PR_SET_PDEATHSIG); what it started itself is found by the wrapper's
process group and killed by the next `status`, which records the node's end then, so it is billed until its last
process ended (gpuplan.jobs.job_group). All through the CLI in child processes.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from gpuplan.jobs.processes import group_members, pid_alive

from support.clihelp import run_subprocess

PRICE = {"GPUPLAN_LOCAL_PRICE_PER_HOUR": "3600"}  # a dollar a second


def wait_for(predicate, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


@pytest.mark.timeout(120)
def test_kill_9_of_the_wrapper_leaves_no_job_running_and_bills_until_its_end(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    # The shell (the wrapper's child) starts two sleeps of its own: they do not get the parent-death signal.
    spec.write_text("name: escapee\nruntime: process\ncommand: 'sleep 300 & sleep 300 & wait'\n")
    out = run_subprocess("launch", str(spec), "-y", "--detach", "--json", env=PRICE)
    assert out.exit_code == 0, out.stderr
    run_id = out.json()["run_id"]
    status = run_subprocess("status", run_id, "--json", env=PRICE).json()
    node = Path(status["run_dir"]) / "node-0"
    wrapper = int(wait_for(lambda: (node / "wrapper.pid").exists() and (node / "job.pid").exists()
                           and (node / "wrapper.pid").read_text().strip()))
    wait_for(lambda: len(group_members(wrapper)) >= 4)  # wrapper, sh, two sleeps
    job = [p for p in group_members(wrapper) if p != wrapper]
    os.kill(wrapper, signal.SIGKILL)
    wait_for(lambda: not pid_alive(wrapper))
    time.sleep(2)  # the orphans run on, and must be billed for it
    assert group_members(wrapper), "the sleeps outlive the wrapper until someone looks"
    killed_at = time.time()
    final = run_subprocess("status", run_id, "--json", env=PRICE).json()
    assert group_members(wrapper) == [] and not any(pid_alive(p) for p in job)
    assert final["state"] not in ("pending", "provisioning", "running"), final
    exit_record = json.loads((node / "exit.json").read_text())
    assert "outlived the wrapper" in exit_record["detail"]
    # Billed from its start until gpuplan killed the last process: at least the 2 s after the wrapper died.
    started = Path(node / "started_at").read_text().strip()
    import datetime as dt

    billed_s = (dt.datetime.fromisoformat(exit_record["ended_at"]) - dt.datetime.fromisoformat(started)).total_seconds()
    assert billed_s >= 2 and float(final["cost_usd"]) >= 2
    assert dt.datetime.fromisoformat(exit_record["ended_at"]).timestamp() >= killed_at - 0.5


@pytest.mark.timeout(180)
def test_kill_9_of_the_wrapper_of_a_container_job_removes_the_container(tmp_path: Path) -> None:
    """A container runs under the runtime's monitor, outside the wrapper's group: it is found by name."""
    import subprocess

    from support.podmanhelp import busybox_image, podman_env

    image = busybox_image()
    env = {**PRICE, **podman_env()}
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: boxed\nimage: {image}\nruntime: podman\ncommand: sleep 300\n")
    out = run_subprocess("launch", str(spec), "-y", "--detach", "--json", env=env)
    assert out.exit_code == 0, out.stderr
    run_id = out.json()["run_id"]
    name = f"gpuplan-{run_id}-0"
    full_env = {**os.environ, **env}

    def running() -> bool:
        return subprocess.run(["podman", "container", "exists", name], env=full_env).returncode == 0

    wait_for(running, timeout=60)
    node = Path(run_subprocess("status", run_id, "--json", env=env).json()["run_dir"]) / "node-0"
    wrapper = int((node / "wrapper.pid").read_text())
    os.kill(wrapper, signal.SIGKILL)
    wait_for(lambda: not pid_alive(wrapper))
    assert running(), "the container outlives the wrapper until someone looks"
    final = run_subprocess("status", run_id, "--json", env=env).json()
    assert not running() and final["state"] not in ("pending", "provisioning", "running"), final
    assert "container" in json.loads((node / "exit.json").read_text())["detail"]
