"""The machine's own fail-safe is the tightest cap, end to end: the local wrapper's timer, EC2 user data (moto),
GCE's maxRunDuration (the fake Compute API), and a launch refused when a cap leaves no time."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from gpuplan.errors import UserError
from gpuplan.jobs.spec import parse_spec
from gpuplan.launching.plan import plan_launch
from gpuplan.launching.record import record_run
from gpuplan.launching.start import launch_recorded_run
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.store.db import Store
from gpuplan.store.models import Run

from support.awsmoto import user_data_of
from support.clihelp import run_cli, run_subprocess

SLEEPER = "name: {name}\nruntime: process\ncommand: echo started; sleep 120\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def events(run_id: str, kind: str) -> list[dict]:
    con = sqlite3.connect(os.environ["GPUPLAN_DB"].removeprefix("sqlite:///"))
    rows = con.execute("SELECT data_json FROM events WHERE run_id = ? AND kind = ?", (run_id, kind)).fetchall()
    con.close()
    return [json.loads(r[0]) for r in rows]


def test_detached_run_with_nobody_watching_is_stopped_by_its_own_budget_timer(tmp_path: Path) -> None:
    spec = write(tmp_path, SLEEPER.format(name="budget-timer") + "limits: {max_hours: 1, budget_usd: 2}\n")
    env = {"GPUPLAN_LOCAL_PRICE_PER_HOUR": "3600"}  # $1 a second: the $2 budget lasts 2 s
    launched = run_subprocess("launch", str(spec), "--detach", "-y", "--json", env=env, timeout=120)
    assert launched.exit_code == 0, launched.stderr
    data = launched.json()
    run_id = data["run_id"]
    assert data["failsafe"]["cap"] == "budget_usd"
    assert data["failsafe"]["hours"] == pytest.approx(2 / 3600)
    assert "machine fail-safe: 0:00:02, set by budget_usd ($2.00 at $3,600.00/h)" in launched.stderr

    # No gpuplan process looks at the run now; only the wrapper's own timer can end the job.
    exit_file = Path(data["run_dir"]) / "node-0" / "exit.json"
    deadline = time.monotonic() + 60
    while not exit_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert json.loads(exit_file.read_text())["reason"] == "max_hours"  # the timer fired, nothing else stopped it

    deadline = time.monotonic() + 60
    while True:
        status = run_cli("status", run_id, "--json")
        assert status.exit_code == 0, status.stderr
        if status.json()["state"] not in ("pending", "provisioning", "running") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    final = status.json()
    assert final["state"] == "capped"
    assert final["state_reason"] == ("budget_usd: the machine's own fail-safe stopped the job at 0.0005556 h "
                                     "($2.00 at $3,600.00/h)")
    [recorded] = events(run_id, "failsafe")
    assert recorded["cap"] == "budget_usd" and {b["cap"] for b in recorded["bounds"]} == {"max_hours", "budget_usd"}
    human = run_cli("status", run_id)
    assert "caps: max 1:00:00, budget $2.0000, machine fail-safe 0:00:02 (budget_usd)" in human.stdout


def test_a_cap_with_no_time_left_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    spec = write(tmp_path, SLEEPER.format(name="too-late") + "limits: {deadline: 2020-01-01T00:00Z}\n")
    result = run_subprocess("launch", str(spec), "-y", "--detach", timeout=60)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: refused: no time left under deadline")
    assert "Traceback" not in result.stderr
    assert run_cli("runs", "--json").json() == []


def test_forced_launch_skips_the_covering_budgets_and_says_so(tmp_path: Path) -> None:
    assert run_cli("budget", "set", "lab", "--amount", "1", "--period", "total").exit_code == 0
    spec = write(tmp_path, SLEEPER.format(name="forced") + "workload: {tokens: 3600, throughput: 1}\n"
                 "limits: {max_hours: 0.01}\n")
    env = {"GPUPLAN_LOCAL_PRICE_PER_HOUR": "36"}  # the 1-hour estimate ($36) is over the $1 budget
    refused = run_subprocess("launch", str(spec), "-y", "--detach", env=env, timeout=60)
    assert refused.exit_code == 2 and "budget 'lab'" in refused.stderr
    launched = run_subprocess("launch", str(spec), "-y", "--detach", "--json", "--force", env=env, timeout=60)
    assert launched.exit_code == 0, launched.stderr
    data = launched.json()
    # Unforced, the $1 left would stop the machines at 100 s; forced, max_hours (36 s) is the tightest cap left.
    assert data["failsafe"]["cap"] == "max_hours" and data["failsafe"]["budgets_skipped"] is True
    [recorded] = events(data["run_id"], "failsafe")
    assert any("--force" in note and "lab" in note for note in recorded["notes"])
    assert run_cli("stop", data["run_id"]).exit_code == 0


def test_dry_run_json_shows_the_fail_safe(tmp_path: Path) -> None:
    spec = write(tmp_path, SLEEPER.format(name="dry") + "limits: {max_hours: 3, budget_usd: 5}\n")
    result = run_cli("launch", str(spec), "--dry-run", "--json", env={"GPUPLAN_LOCAL_PRICE_PER_HOUR": "10"})
    assert result.exit_code == 0, result.stderr
    fs = result.json()["failsafe"]
    assert (fs["cap"], fs["hours"]) == ("budget_usd", 0.5)


# ---- AWS (moto in-process): the boot script's power-off timer ------------------------------------------------

AWS_SPEC = """\
name: aws-budget
runtime: process
command: python train.py
resources:
  gpu: A10G:1
  regions: [us-east-1]
limits:
  max_hours: 10
  budget_usd: {budget}
"""


@pytest.fixture
def store() -> Any:
    store = Store.open(os.environ["GPUPLAN_DB"])
    yield store
    store.close()


def aws_launch(store: Any, aws: AwsProvider, budget: str) -> str:
    text = AWS_SPEC.format(budget=budget)
    plan = plan_launch(parse_spec(text), text, provider=aws)
    run_id = record_run(store, plan)
    launch_recorded_run(store, run_id, plan, aws, {})
    return run_id


def test_aws_user_data_carries_the_budget_s_shorter_timer(store: Any, aws: AwsProvider, aws_session: Any) -> None:
    run_id = aws_launch(store, aws, budget="1.50")
    with store.session() as s:
        run = s.get(Run, run_id)
        [row] = run.instances
        price, instance_id = row.price_per_hour, row.provider_instance_id
    [recorded] = events(run_id, "failsafe")
    assert recorded["cap"] == "budget_usd"
    assert recorded["hours"] == pytest.approx(float(1.50 / float(price)))
    assert recorded["hours"] < 10
    ec2 = aws_session.client("ec2", region_name="us-east-1")
    user_data = user_data_of(ec2, instance_id)
    assert f"MAX_SECONDS={int(recorded['hours'] * 3600)}" in user_data
    assert "MAX_SECONDS=36000" not in user_data


def test_aws_budget_short_of_the_minute_minimum_is_refused_before_any_machine(store: Any, aws: AwsProvider) -> None:
    with pytest.raises(UserError, match=r"refused: no time left under budget_usd .*60 s minimum billing"):
        aws_launch(store, aws, budget="0.001")
    with store.session() as s:
        [run] = s.query(Run).all()
        assert run.state == "failed" and run.instances == []
    assert aws.list_tagged(run.id) == []


# ---- GCP (the fake Compute API): maxRunDuration ----------------------------------------------------------------

GCP_SPEC = """\
name: gcp-budget
command: python train.py
resources:
  gpu: L4
  gpus_per_node: 1
  regions: [us-central1]
limits:
  max_hours: 10
  budget_usd: 2
"""


def test_gcp_max_run_duration_reflects_the_budget(gce: Any, tmp_path: Path) -> None:
    spec = write(tmp_path, GCP_SPEC)
    launched = run_subprocess("launch", str(spec), "--provider", "gcp", "-y", "--detach", "--json", timeout=120)
    assert launched.exit_code == 0, launched.stderr
    data = launched.json()
    fs = data["failsafe"]
    assert fs["cap"] == "budget_usd" and fs["hours"] < 10
    [vm] = gce.state.live()
    assert vm["scheduling"]["maxRunDuration"] == {"seconds": str(int(fs["hours"] * 3600))}
    assert vm["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert run_subprocess("stop", data["run_id"], "--json").exit_code == 0
