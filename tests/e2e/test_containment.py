"""No process of a local run outlives its books (issue 38, class 1), with either containment
(gpuplan.jobs.containment): the node's cgroup where one can be made, the subreaper + member snapshot elsewhere.

A job that leaves its process group (`setsid`), double-forks, or unsets GPUPLAN_RUN_ID: its leftovers end with the
job (billed until then), with `stop`, and after a `kill -9` of the wrapper at the next `status`. All through the CLI
as separate processes; every leftover is found by a unique sleep length in its command line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
from pathlib import Path

import pytest

from gpuplan.jobs.containment import cgroup2_mounts
from gpuplan.jobs.processes import pid_alive

from support.clihelp import run_subprocess
from support.sleepers import sleeping

PRICE = {"GPUPLAN_LOCAL_PRICE_PER_HOUR": "3600"}  # a dollar a second


def _cgroup_possible() -> bool:
    return any(os.access(m, os.W_OK) for m in cgroup2_mounts())


@pytest.fixture(params=["cgroup", "group"])
def containment(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "cgroup" and not _cgroup_possible():
        pytest.skip("no writable cgroup2 mount here (the group fallback is tested instead)")
    return {**PRICE, "GPUPLAN_CONTAINMENT": request.param}


def escaping_command(seconds: str, then: str) -> str:
    """Three ways out of a process group / the run's environment, then `then`."""
    return (f"setsid sh -c 'sleep {seconds}' & "
            f"(sh -c 'sleep {seconds} &' &) ; "
            f"(unset GPUPLAN_RUN_ID; setsid sleep {seconds} &) ; {then}")


def wait_for(predicate, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def launch(tmp_path: Path, command: str, env: dict[str, str]) -> tuple[str, Path]:
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: escapee\nruntime: process\ncommand: {json.dumps(command)}\n")
    out = run_subprocess("launch", str(spec), "-y", "--detach", "--json", env=env)
    assert out.exit_code == 0, out.stderr
    run_id = out.json()["run_id"]
    status = run_subprocess("status", run_id, "--json", env=env).json()
    return run_id, Path(status["run_dir"]) / "node-0"


@pytest.mark.timeout(120)
def test_what_a_finished_job_left_running_ends_with_it(tmp_path: Path, containment: dict[str, str],
                                                        marker: str) -> None:
    run_id, node = launch(tmp_path, escaping_command(marker, "sleep 1"), containment)
    wait_for(lambda: (node / "exit.json").exists())
    assert sleeping(marker) == [], "a process of the job outlived its recorded end"
    final = run_subprocess("status", run_id, "--json", env=containment).json()
    assert final["state"] == "succeeded"
    assert json.loads((node / "containment.json").read_text())["kind"] == containment["GPUPLAN_CONTAINMENT"]


@pytest.mark.timeout(120)
def test_stop_ends_what_left_the_group(tmp_path: Path, containment: dict[str, str], marker: str) -> None:
    run_id, _node = launch(tmp_path, escaping_command(marker, "sleep 300"), containment)
    wait_for(lambda: len(sleeping(marker)) == 3)
    time.sleep(0.6)  # the group fallback's snapshot
    out = run_subprocess("stop", run_id, env=containment)
    assert out.exit_code == 0, out.stderr
    assert sleeping(marker) == []
    assert run_subprocess("status", run_id, "--json", env=containment).json()["state"] not in ("running", "pending")


@pytest.mark.timeout(120)
def test_kill_9_of_the_wrapper_then_status_ends_the_leftovers_and_bills_them(
        tmp_path: Path, containment: dict[str, str], marker: str) -> None:
    run_id, node = launch(tmp_path, escaping_command(marker, "sleep 300"), containment)
    wait_for(lambda: len(sleeping(marker)) == 3)
    time.sleep(0.6)  # the group fallback's snapshot
    wrapper = int((node / "wrapper.pid").read_text())
    os.kill(wrapper, signal.SIGKILL)
    wait_for(lambda: not pid_alive(wrapper))
    time.sleep(1.5)
    assert len(sleeping(marker)) == 3, "the leftovers run on until someone looks"
    looked_at = time.time()
    final = run_subprocess("status", run_id, "--json", env=containment).json()
    assert sleeping(marker) == []
    assert final["state"] not in ("pending", "provisioning", "running"), final
    ended = dt.datetime.fromisoformat(json.loads((node / "exit.json").read_text())["ended_at"]).timestamp()
    assert ended >= looked_at - 0.5, "billed until the last process ended, not until the wrapper died"
    again = run_subprocess("reconcile", "--json", env=containment)
    assert again.exit_code == 0, again.stderr
