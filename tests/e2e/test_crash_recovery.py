"""A `gpuplan launch` killed with SIGKILL at each interesting point, then recovered by a new process.

The launch runs as a real subprocess; GPUPLAN_TEST_PAUSE_AT (gpuplan.testpoint) makes it stop at a named point
and write a marker file, the test kills it there with SIGKILL, and `gpuplan stop`, `status` and `reconcile`,
each in a fresh process, must find the machines, record them (billed from their real launch time) and end them.
Local provider: the machines are real detached processes. AWS: a moto server reached through AWS_ENDPOINT_URL.
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
from typing import Any

import pytest

from gpuplan.runs.events import EventKind

from support.awsmoto import no_capacity_sitecustomize, spot_interrupt
from support.clihelp import Result, run_subprocess

pytestmark = pytest.mark.slow

PRICE = "36"  # $/h for the local machine: $0.01 a second, so a few seconds cost something visible

LOCAL_JOB = """\
name: crash-local
runtime: process
command: sleep 300
limits:
  max_hours: 1
"""

# Capped by gpuplan (the follow loop's budget pass), not by the machine: every cap of the run itself is also the
# machine's own fail-safe (gpuplan.launching.failsafe), which would end the job on its own. A covering budget the launch
# was --force'd past is the one cap the fail-safe leaves to gpuplan.
CAPPED_JOB = """\
name: crash-capped
runtime: process
project: crash
command: sleep 300
workload: {tokens: 3600, throughput: 1}
limits:
  max_hours: 1
"""


def gpuplan(*args: str, env: dict[str, str] | None = None) -> Result:
    return run_subprocess(*args, env=env, timeout=120)


def killed_launch(tmp_path: Path, job_text: str, point: str | None, *args: str,
                  env: dict[str, str] | None = None, until: Any = None) -> None:
    """Run `gpuplan launch` until it reaches `point` (or `until()` holds), then SIGKILL it."""
    job = tmp_path / "job.yaml"
    job.write_text(job_text)
    killed(tmp_path, ["launch", str(job), "-y", "--interval", "0.2", *args], point, env=env, until=until)


def killed(tmp_path: Path, argv: list[str], point: str | None, *, env: dict[str, str] | None = None,
           until: Any = None, while_paused: Any = None) -> None:
    """Run `gpuplan ARGV` until it reaches `point` (or `until()` holds), call `while_paused()` (the process is
    alive, stopped there), then SIGKILL it."""
    marker = tmp_path / f"paused-{point}"
    full_env = {**os.environ, **(env or {})}
    if point:
        full_env.update({"GPUPLAN_TEST_PAUSE_AT": point, "GPUPLAN_TEST_PAUSE_FILE": str(marker)})
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", *argv],
                            env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while not (marker.exists() if point else until()):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else proc.returncode
            assert time.monotonic() < deadline, f"the launch never reached {point or until}"
            time.sleep(0.05)
        if while_paused is not None:
            while_paused()
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL  # reaped: its pid is gone, as after a real crash
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def books(run_id: str | None = None) -> dict[str, Any]:
    """The run (the only one if no id) as the database holds it: state, instance rows, event kinds."""
    from sqlalchemy import select

    from gpuplan.store.db import Store
    from gpuplan.store.models import Run

    store = Store.open(os.environ["GPUPLAN_DB"])
    try:
        with store.session() as s:
            run = s.get(Run, run_id) if run_id else s.scalars(select(Run)).one()
            assert run is not None
            return {"id": run.id, "state": run.state, "run_dir": run.run_dir,
                    "rows": [(i.provider_instance_id, i.launched_at, i.terminated_at, Decimal(i.price_per_hour))
                             for i in run.instances],
                    "events": [e.kind for e in run.events],
                    "plans": [json.loads(e.data_json) for e in run.events if e.kind == EventKind.LAUNCH_PLAN]}
    finally:
        store.close()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wrapper_pid(run_dir: str) -> int:
    return int((Path(run_dir) / "node-0" / "wrapper.pid").read_text())


def started_at(run_dir: str) -> dt.datetime:
    return dt.datetime.fromisoformat((Path(run_dir) / "node-0" / "started_at").read_text().strip())


def assert_cost_is_rows(summary: dict[str, Any]) -> None:
    """The run's cost is its rows' price x billed time (per second, no minimum on the local provider)."""
    expected = Decimal(0)
    for row in summary["instances"]:
        start = dt.datetime.fromisoformat(row["launched_at"])
        end = dt.datetime.fromisoformat(row["terminated_at"])
        expected += Decimal(str(row["price_per_hour"])) * Decimal(str((end - start).total_seconds())) / 3600
    assert summary["cost_usd"] > 0
    assert abs(Decimal(str(summary["cost_usd"])) - expected) <= Decimal("0.000002")


@pytest.fixture
def local_price(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPLAN_LOCAL_PRICE_PER_HOUR", PRICE)


# ---- local provider: real processes ---------------------------------------------------------------------------


def test_killed_before_the_provider_call_status_says_failed_and_nothing_runs(tmp_path: Path, local_price: None) -> None:
    killed_launch(tmp_path, LOCAL_JOB, "recorded", "--detach")
    run = books()
    assert run["state"] == "provisioning" and run["rows"] == []
    [plan] = run["plans"]  # written before any provider call: where a later process must look, and who launched
    assert plan["provider"] == "local" and plan["regions"] == ["local"] and isinstance(plan["pid"], int)
    assert not (Path(run["run_dir"]) / "node-0").exists()

    status = gpuplan("status", run["id"], "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["state"] == "failed" and status.json()["cost_usd"] == 0
    assert gpuplan("reconcile", "--json").json() == []


def test_killed_before_its_launch_plan_the_run_settles_at_once(tmp_path: Path, local_price: None) -> None:
    """Killed right after the run and its reservation were committed, before the launch plan: the run records its
    launcher (host, pid, start time), so `status` sees the launcher gone and settles the run at once (it used to
    stay `pending` for ORPHAN_AFTER, holding its budget reservation)."""
    assert gpuplan("budget", "set", "all", "--amount", "100", "--period", "total").exit_code == 0
    killed_launch(tmp_path, LOCAL_JOB, "reserved", "--detach")
    run = books()
    assert run["state"] == "pending" and run["plans"] == [] and run["rows"] == []
    [held] = gpuplan("budget", "status", "--json").json()
    assert held["reserved_usd"] == 36  # max_hours 1 at $36/h, held by the dead launch
    status = gpuplan("status", run["id"], "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["state"] == "failed" and status.json()["cost_usd"] == 0
    [released] = gpuplan("budget", "status", "--json").json()
    assert released["reserved_usd"] == 0 and released["free_usd"] == 100


def test_killed_after_the_machine_started_stop_adopts_and_ends_it(tmp_path: Path, local_price: None) -> None:
    killed_launch(tmp_path, LOCAL_JOB, "launched", "--detach")
    run = books()
    assert run["state"] == "provisioning" and run["rows"] == []  # the machine runs; the books do not know it
    pid = wrapper_pid(run["run_dir"])
    assert pid_alive(pid)
    began = started_at(run["run_dir"])

    stopped = gpuplan("stop", run["id"], "--json")
    assert stopped.exit_code == 0, stopped.stderr
    summary = stopped.json()
    assert summary["state"] == "stopped"
    [row] = summary["instances"]
    assert row["instance_id"] == f"{run['id']}/node-0" and row["state"] == "terminated"
    assert dt.datetime.fromisoformat(row["launched_at"]) == began  # billed from its real start, not the adoption
    assert Decimal(str(row["price_per_hour"])) == Decimal(PRICE)
    assert_cost_is_rows(summary)
    assert not pid_alive(pid)
    assert "adopted" in books(run["id"])["events"]
    assert gpuplan("reconcile", "--json").json() == []


def test_killed_after_the_machine_started_status_adopts_and_reconcile_agrees(tmp_path: Path,
                                                                             local_price: None) -> None:
    killed_launch(tmp_path, LOCAL_JOB, "launched", "--detach")
    run = books()
    status = gpuplan("status", run["id"], "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["state"] == "running"
    assert [i["instance_id"] for i in status.json()["instances"]] == [f"{run['id']}/node-0"]
    assert gpuplan("reconcile", "--terminate", "-y", "--grace", "0", "--json").json() == []  # known, left running
    assert pid_alive(wrapper_pid(run["run_dir"]))
    stopped = gpuplan("stop", run["id"], "--json").json()
    assert stopped["state"] == "stopped"
    assert_cost_is_rows(stopped)
    assert not pid_alive(wrapper_pid(run["run_dir"]))


def test_adopted_in_a_shell_without_the_local_price_is_billed_at_the_recorded_price(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_price: None) -> None:
    """The launch plan's price wins over the adopter's environment (issue 38, class 3): was billed at $0."""
    killed_launch(tmp_path, LOCAL_JOB, "launched", "--detach")
    monkeypatch.delenv("GPUPLAN_LOCAL_PRICE_PER_HOUR")
    run = books()
    status = gpuplan("status", run["id"], "--json")
    assert status.exit_code == 0, status.stderr
    assert [row[3] for row in books(run["id"])["rows"]] == [Decimal(PRICE)]
    stopped = gpuplan("stop", run["id"], "--json").json()
    assert_cost_is_rows(stopped)


def test_killed_after_the_machine_started_reconcile_adopts_it(tmp_path: Path, local_price: None) -> None:
    killed_launch(tmp_path, LOCAL_JOB, "launched", "--detach")
    run = books()
    found = gpuplan("reconcile", "--terminate", "-y", "--grace", "0", "--json")
    assert found.exit_code == 0, found.stderr
    assert [(r["kind"], r["run_id"], r["action"]) for r in found.json()] == [("in-flight", run["id"], "adopted")]
    after = books(run["id"])
    assert after["state"] == "running" and len(after["rows"]) == 1 and after["rows"][0][2] is None
    assert after["rows"][0][1] == started_at(run["run_dir"])
    assert pid_alive(wrapper_pid(run["run_dir"]))  # a live run's machine: adopted, not killed
    assert gpuplan("reconcile", "--json").json() == []
    stopped = gpuplan("stop", run["id"], "--json").json()
    assert stopped["state"] == "stopped" and not pid_alive(wrapper_pid(run["run_dir"]))
    assert_cost_is_rows(stopped)


BUDGET_JOB = """\
name: crash-budget
runtime: process
command: sleep 300
limits:
  max_hours: 1
  budget_usd: 2
"""


def test_killed_after_the_machine_started_the_budget_set_fail_safe_is_still_known(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch dies after the machine started with the budget's timer and before the `failsafe` event: the
    launch plan, committed before the start, still tells status and the fired timer's reason which cap set it."""
    monkeypatch.setenv("GPUPLAN_LOCAL_PRICE_PER_HOUR", "3600")  # $1 a second: the $2 budget lasts 2 s
    killed_launch(tmp_path, BUDGET_JOB, "launched", "--detach")
    run = books()
    assert run["rows"] == [] and "failsafe" not in run["events"]  # the machine runs; the books do not know it
    [plan] = run["plans"]
    assert (plan["failsafe"]["cap"], plan["failsafe"]["hours"]) == ("budget_usd", pytest.approx(2 / 3600))
    assert [p["failsafe"]["cap"] for p in plan["placements"]] == ["budget_usd"]

    status = gpuplan("status", run["id"], "--json")  # adopts the machine (or, already ended, settles the run)
    assert status.exit_code == 0, status.stderr
    fs = status.json()["failsafe"]
    assert (fs["cap"], fs["hours"]) == ("budget_usd", pytest.approx(2 / 3600))
    assert "adopted" in books(run["id"])["events"]

    deadline = time.monotonic() + 60
    while True:  # no gpuplan watches the run: only the wrapper's own timer can end the job
        summary = gpuplan("status", run["id"], "--json").json()
        if summary["state"] not in ("pending", "provisioning", "running") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert summary["state"] == "capped"
    assert summary["state_reason"] == ("budget_usd: the machine's own fail-safe stopped the job at 0.0005556 h "
                                       "($2.00 at $3,600.00/h)")
    assert json.loads((Path(run["run_dir"]) / "node-0" / "exit.json").read_text())["reason"] == "max_hours"
    assert "failsafe" not in books(run["id"])["events"]  # the plan stood in; no second record was invented
    human = gpuplan("status", run["id"])
    assert "caps: max 1:00:00, budget $2.0000, machine fail-safe 0:00:02 (budget_usd)" in human.stdout
    assert_cost_is_rows(summary)


def test_killed_while_following_stop_ends_the_recorded_machine(tmp_path: Path, local_price: None) -> None:
    killed_launch(tmp_path, LOCAL_JOB, None, until=lambda: _has_rows())
    run = books()
    assert run["state"] == "running" and len(run["rows"]) == 1
    pid = wrapper_pid(run["run_dir"])
    stopped = gpuplan("stop", run["id"], "--json").json()
    assert stopped["state"] == "stopped" and not pid_alive(pid)
    assert_cost_is_rows(stopped)
    assert "adopted" not in books(run["id"])["events"]


def _has_rows() -> bool:
    try:
        return bool(books()["rows"])
    except Exception:  # no database or no run yet
        return False


@pytest.mark.parametrize("recover", ["stop", "reconcile"])
def test_killed_during_teardown_the_machine_is_still_ended(tmp_path: Path, local_price: None, recover: str) -> None:
    """The budget caps the followed run (committed), and the launch dies before terminating the machine."""
    budget = gpuplan("budget", "set", "crash", "--amount", "0.02", "--period", "total", "--project", "crash")
    assert budget.exit_code == 0, budget.stderr
    killed_launch(tmp_path, CAPPED_JOB, "teardown", "--force")
    run = books()
    assert run["state"] == "capped" and len(run["rows"]) == 1 and run["rows"][0][2] is None
    pid = wrapper_pid(run["run_dir"])
    assert pid_alive(pid)
    if recover == "stop":
        summary = gpuplan("stop", run["id"], "--json").json()
    else:
        found = gpuplan("reconcile", "--terminate", "-y", "--json")
        assert [(r["kind"], r["action"]) for r in found.json()] == [("orphan", "terminated")], found.stderr
        summary = gpuplan("status", run["id"], "--json").json()
    assert summary["state"] == "capped"
    assert [i["terminated_at"] is not None for i in summary["instances"]] == [True]
    assert not pid_alive(pid)
    assert_cost_is_rows(summary)


# ---- the local wrapper when its launcher dies around Popen ---------------------------------------------------


def _node(root: Path, run_id: str, argv: list[str]) -> Path:
    """A node folder as LocalProvider.launch writes it before starting the wrapper."""
    from gpuplan.jobs.runner import LAUNCH_FILE, NodeLaunch
    from gpuplan.providers.base import TAG_RUN_ID

    node_dir = root / run_id / "node-0"
    node_dir.mkdir(parents=True)
    launch = NodeLaunch(run_id=run_id, name="n", argv=argv, run_dir=str(node_dir.parent), runtime="process")
    (node_dir / LAUNCH_FILE).write_text(launch.to_json())
    (node_dir / "tags.json").write_text(json.dumps({TAG_RUN_ID: run_id}))
    return node_dir


def test_a_wrapper_whose_launcher_died_before_writing_its_pid_is_found_and_stopped(tmp_path: Path) -> None:
    """The launcher started the wrapper and died before writing wrapper.pid: the wrapper wrote it itself."""
    from gpuplan.providers.base import InstanceState
    from gpuplan.providers.local import LocalProvider

    local = LocalProvider(root=tmp_path / "runs")
    node_dir = _node(local.root, "r-popen", ["sleep", "300"])
    wrapper = subprocess.Popen([sys.executable, "-m", "gpuplan.jobs.runner", str(node_dir)],
                               start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not (node_dir / "job.pid").exists():  # the job started: the wrapper is past its pid file
            assert time.monotonic() < deadline and wrapper.poll() is None
            time.sleep(0.05)
        assert wrapper_pid(str(node_dir.parent)) == wrapper.pid
        [found] = local.list_tagged("r-popen")
        assert found.state == InstanceState.RUNNING
        local.terminate([found.instance_id])
        assert wrapper.wait(timeout=30) is not None
        [ended] = local.describe([found.instance_id])
        assert ended.state == InstanceState.TERMINATED and ended.state_reason == "stopped"
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
            wrapper.wait()


def test_a_node_stopped_before_its_wrapper_started_runs_nothing(tmp_path: Path) -> None:
    """The launcher wrote the node folder and died before (or while) starting the wrapper: a stop records the end,
    and a wrapper that starts afterwards does not run the job."""
    from gpuplan.providers.base import InstanceState
    from gpuplan.providers.local import LocalProvider

    local = LocalProvider(root=tmp_path / "runs")
    ran = tmp_path / "ran"
    node_dir = _node(local.root, "r-early", ["touch", str(ran)])
    [pending] = local.list_tagged("r-early")
    assert pending.state == InstanceState.PENDING
    local.terminate([pending.instance_id])
    [ended] = local.describe([pending.instance_id])
    assert ended.state == InstanceState.TERMINATED and ended.state_reason == "stopped"
    assert local.list_tagged("r-early") == []
    late = subprocess.run([sys.executable, "-m", "gpuplan.jobs.runner", str(node_dir)], timeout=60)
    assert late.returncode == 0 and not ran.exists()


# ---- AWS through a moto server ----------------------------------------------------------------------------------

AWS_JOB = """\
name: crash-aws
runtime: process
command: python train.py
resources:
  gpu: A10G:1
  regions: [{regions}]
limits:
  max_hours: 1
"""

# Planted in the launching child only: every RunInstances in one region answers EC2's capacity error, so the
# failover moves the machine to the next region of the plan (never used by the product).
NO_CAPACITY_IN = no_capacity_sitecustomize("CRASH_TEST_NO_CAPACITY_IN")


def live_in(endpoint: str, region: str, run_id: str) -> list[dict[str, Any]]:
    import boto3

    from gpuplan.providers.base import TAG_RUN_ID

    ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint)
    pages = ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]},
                                            {"Name": f"tag:{TAG_RUN_ID}", "Values": [run_id]}])["Reservations"]
    return [i for r in pages for i in r["Instances"]]


def assert_aws_cost(summary: dict[str, Any]) -> None:
    """Per second with AWS's 60 s minimum, at the price recorded on the machine's tag."""
    [row] = summary["instances"]
    seconds = (dt.datetime.fromisoformat(row["terminated_at"]) -
               dt.datetime.fromisoformat(row["launched_at"])).total_seconds()
    expected = Decimal(str(row["price_per_hour"])) * Decimal(str(max(seconds, 60))) / 3600
    assert Decimal(str(row["price_per_hour"])) > 0
    assert abs(Decimal(str(summary["cost_usd"])) - expected) <= Decimal("0.000002")


def test_aws_killed_before_run_instances_leaves_a_failed_run_and_no_machine(moto_server: Any,
                                                                             tmp_path: Path) -> None:
    killed_launch(tmp_path, AWS_JOB.format(regions="us-east-1"), "recorded", "--provider", "aws", "--detach")
    run = books()
    assert run["state"] == "provisioning" and run["plans"][0]["regions"] == ["us-east-1"]
    assert live_in(moto_server.endpoint, "us-east-1", run["id"]) == []
    status = gpuplan("status", run["id"], "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["state"] == "failed" and status.json()["instances"] == []


def test_aws_killed_after_run_instances_stop_adopts_and_terminates(moto_server: Any, tmp_path: Path) -> None:
    killed_launch(tmp_path, AWS_JOB.format(regions="us-east-1"), "launched", "--provider", "aws", "--detach")
    run = books()
    assert run["state"] == "provisioning" and run["rows"] == []
    [machine] = live_in(moto_server.endpoint, "us-east-1", run["id"])

    stopped = gpuplan("stop", run["id"], "--json")
    assert stopped.exit_code == 0, stopped.stderr
    summary = stopped.json()
    assert summary["state"] == "stopped"
    [row] = summary["instances"]
    assert row["instance_id"] == machine["InstanceId"] and row["terminated_at"] is not None
    assert dt.datetime.fromisoformat(row["launched_at"]) == machine["LaunchTime"]  # billed from EC2's LaunchTime
    assert_aws_cost(summary)
    assert live_in(moto_server.endpoint, "us-east-1", run["id"]) == []
    assert "adopted" in books(run["id"])["events"]


def test_aws_killed_after_run_instances_a_machine_that_ended_meanwhile_is_billed(moto_server: Any,
                                                                                  tmp_path: Path) -> None:
    """The machine the dead launch started ended by itself before anyone looked (the on-instance fail-safe, a
    spot interruption): EC2 lists it for about an hour after, so the next step records it and bills the time it
    ran, instead of calling the launch one that never started anything."""
    import boto3

    killed_launch(tmp_path, AWS_JOB.format(regions="us-east-1"), "launched", "--provider", "aws", "--detach")
    run = books()
    [machine] = live_in(moto_server.endpoint, "us-east-1", run["id"])
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_server.endpoint)
    ec2.terminate_instances(InstanceIds=[machine["InstanceId"]])
    assert live_in(moto_server.endpoint, "us-east-1", run["id"]) == []

    status = gpuplan("status", run["id"], "--json")
    assert status.exit_code == 0, status.stderr
    summary = status.json()
    assert summary["state"] not in ("pending", "provisioning", "running")
    [row] = summary["instances"]
    assert row["instance_id"] == machine["InstanceId"] and row["terminated_at"] is not None
    assert dt.datetime.fromisoformat(row["launched_at"]) == machine["LaunchTime"]
    assert_aws_cost(summary)
    assert "adopted" in books(run["id"])["events"]


def test_aws_killed_after_failover_reconcile_finds_the_machine_in_the_planned_region(
        moto_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first region has no capacity, the machine starts in the second, and the launch dies before recording
    it: the run row still names the first region; only the launch plan says where else to look."""
    job = tmp_path / "plan.yaml"
    job.write_text(AWS_JOB.format(regions="us-east-1, us-west-2"))
    chosen = gpuplan("launch", str(job), "--provider", "aws", "--dry-run", "--json").json()["region"]
    [fallback] = [r for r in ("us-east-1", "us-west-2") if r != chosen]
    # The recovering processes' default region is neither, so nothing but the launch plan points at `fallback`.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(NO_CAPACITY_IN)
    killed_launch(tmp_path, AWS_JOB.format(regions="us-east-1, us-west-2"), "launched", "--provider", "aws",
                  "--detach", env={"PYTHONPATH": str(hooks), "CRASH_TEST_NO_CAPACITY_IN": chosen})
    run = books()
    assert run["rows"] == [] and set(run["plans"][0]["regions"]) == {"us-east-1", "us-west-2"}
    [machine] = live_in(moto_server.endpoint, fallback, run["id"])

    found = gpuplan("reconcile", "--cloud", "aws", "--json")
    assert found.exit_code == 0, found.stderr
    assert [(r["region"], r["instance_id"], r["run_id"], r["action"]) for r in found.json()] == \
        [(fallback, machine["InstanceId"], run["id"], "adopted")]
    stopped = gpuplan("stop", run["id"], "--json")
    assert stopped.exit_code == 0, stopped.stderr
    assert stopped.json()["state"] == "stopped"
    assert_aws_cost(stopped.json())
    assert live_in(moto_server.endpoint, fallback, run["id"]) == []


def test_aws_stop_killed_before_terminating_is_finished_by_the_next_stop(moto_server: Any, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(AWS_JOB.format(regions="us-east-1"))
    launched = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    killed(tmp_path, ["stop", run_id], "teardown")
    run = books(run_id)
    assert run["state"] == "stopped" and [r[2] for r in run["rows"]] == [None]  # committed, not yet terminated
    [machine] = live_in(moto_server.endpoint, "us-east-1", run_id)
    again = gpuplan("stop", run_id, "--json")
    assert again.exit_code == 0, again.stderr
    assert [i["instance_id"] for i in again.json()["instances"]] == [machine["InstanceId"]]
    assert_aws_cost(again.json())
    assert live_in(moto_server.endpoint, "us-east-1", run_id) == []


# ---- a spot relaunch killed half-way (the watch step relaunches; `status` runs one watch step) -------------------

AWS_SPOT_JOB = """\
name: crash-spot
runtime: process
command: python train.py --resume
resources:
  gpu: A10G:1
  spot: true
  regions: [us-east-1]
checkpoint: {dir: ckpt, interval: 10m}
limits:
  max_hours: 1
"""


def interrupted_spot_run(moto_server: Any, tmp_path: Path) -> tuple[str, str]:
    """A detached spot run on moto whose machine EC2 has just interrupted: (run id, interrupted instance id)."""
    job = tmp_path / "spot.yaml"
    job.write_text(AWS_SPOT_JOB)
    launched = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    [machine] = live_in(moto_server.endpoint, "us-east-1", run_id)
    spot_interrupt(machine["InstanceId"])
    return run_id, machine["InstanceId"]


def test_aws_relaunch_killed_after_starting_the_machine_is_recorded_not_repeated(moto_server: Any,
                                                                                 tmp_path: Path) -> None:
    run_id, first = interrupted_spot_run(moto_server, tmp_path)

    def meanwhile() -> None:  # the relaunching gpuplan is alive: another step leaves its relaunch to it
        other = gpuplan("status", run_id, "--json")
        assert other.exit_code == 0, other.stderr
        assert other.json()["state"] == "running"
        assert len(live_in(moto_server.endpoint, "us-east-1", run_id)) == 1
        assert "relaunch" not in books(run_id)["events"]

    killed(tmp_path, ["status", run_id], "relaunched", while_paused=meanwhile)
    run = books(run_id)
    assert run["plans"][-1]["generation"] == 1 and "relaunch" not in run["events"]
    [second] = live_in(moto_server.endpoint, "us-east-1", run_id)
    assert second["InstanceId"] not in {row[0] for row in run["rows"]}  # started, never recorded

    status = gpuplan("status", run_id, "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["state"] == "running"
    assert [m["InstanceId"] for m in live_in(moto_server.endpoint, "us-east-1", run_id)] == [second["InstanceId"]]
    run = books(run_id)
    assert run["events"].count("relaunch") == 1 and "adopted" in run["events"]
    assert "relaunch_failed" not in run["events"]
    rows = {row[0]: row for row in run["rows"]}
    assert set(rows) == {first, second["InstanceId"]}
    assert rows[second["InstanceId"]][1] == second["LaunchTime"]  # billed from EC2's LaunchTime
    assert rows[first][2] is not None  # the interrupted machine's time is closed and billed too

    stopped = gpuplan("stop", run_id, "--json")
    assert stopped.exit_code == 0, stopped.stderr
    assert stopped.json()["state"] == "stopped"
    assert live_in(moto_server.endpoint, "us-east-1", run_id) == []


def test_aws_relaunch_killed_before_starting_a_machine_relaunches_once(moto_server: Any, tmp_path: Path) -> None:
    run_id, first = interrupted_spot_run(moto_server, tmp_path)
    killed(tmp_path, ["status", run_id], "relaunch_planned")
    run = books(run_id)
    assert run["plans"][-1]["generation"] == 1 and run["state"] == "running"
    assert [row[2] is not None for row in run["rows"]] == [True]  # the interruption is committed with the plan
    assert live_in(moto_server.endpoint, "us-east-1", run_id) == []

    status = gpuplan("status", run_id, "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["state"] == "running"
    [machine] = live_in(moto_server.endpoint, "us-east-1", run_id)
    run = books(run_id)
    assert run["events"].count("relaunch_failed") == 1 and run["events"].count("relaunch") == 1
    assert {row[0] for row in run["rows"]} == {first, machine["InstanceId"]}

    again = gpuplan("status", run_id, "--json")  # settled: a later step changes nothing
    assert again.exit_code == 0, again.stderr
    assert [m["InstanceId"] for m in live_in(moto_server.endpoint, "us-east-1", run_id)] == [machine["InstanceId"]]
    assert books(run_id)["events"].count("relaunch") == 1
    assert gpuplan("stop", run_id, "--json").exit_code == 0
    assert live_in(moto_server.endpoint, "us-east-1", run_id) == []
