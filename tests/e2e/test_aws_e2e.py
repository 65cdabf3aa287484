"""End to end against a moto server on 127.0.0.1: the CLI as a subprocess, faults at each step of a launch, reconcile.

The process under test reaches moto through AWS_ENDPOINT_URL only (moto_server's env, checked loopback). Faults
are planted in the child through a sitecustomize module that hooks botocore's event system: the child kills
itself with SIGKILL at the chosen moment, as a crash or `kill -9` would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from gpuplan.providers.base import TAG_RUN_ID
from gpuplan.runs.events import EventKind

from support.awsmoto import MotoServer, ec2_error_sitecustomize, no_capacity_sitecustomize, user_data_of
from support.clihelp import Result, run_subprocess
from support.run_storage import use_s3_storage

pytestmark = pytest.mark.slow

JOB = """\
name: moto-smoke
runtime: process
command: python train.py --steps 100
resources:
  gpu: A10G:1
  regions: [us-east-1]
limits:
  max_hours: 1
project: demo
"""

# Planted in the child: SIGKILL itself at one step of the launch (never used by the product).
FAULTS = textwrap.dedent("""\
    import os, signal
    _fault = os.environ.get("GPUPLAN_TEST_FAULT")
    if _fault:
        import botocore.session
        _create = botocore.session.Session.create_client
        _state = {"ran": False}

        def _die(**_):
            os.kill(os.getpid(), signal.SIGKILL)

        def _ran(**_):
            _state["ran"] = True
            if _fault == "after-run-instances":
                _die()

        def _describe(**_):
            if _fault == "after-commit" and _state["ran"]:
                _die()

        def create_client(self, service_name, *args, **kwargs):
            client = _create(self, service_name, *args, **kwargs)
            if service_name == "ec2":
                if _fault == "before-run-instances":
                    client.meta.events.register("before-call.ec2.RunInstances", _die)
                client.meta.events.register("after-call.ec2.RunInstances", _ran)
                client.meta.events.register("before-call.ec2.DescribeInstances", _describe)
            return client

        botocore.session.Session.create_client = create_client
""")


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


@pytest.fixture
def faults_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "faults"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(FAULTS)
    return folder


def gpuplan(*args: str, env: dict[str, str] | None = None) -> Result:
    return run_subprocess(*args, env=env, timeout=120)


def live_tagged(moto: MotoServer, run_id: str | None = None) -> list[dict[str, Any]]:
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto.endpoint)
    filters = [{"Name": "instance-state-name", "Values": ["pending", "running"]},
               {"Name": f"tag:{TAG_RUN_ID}", "Values": [run_id]} if run_id else
               {"Name": "tag-key", "Values": [TAG_RUN_ID]}]
    pages = ec2.describe_instances(Filters=filters)["Reservations"]
    return [i for r in pages for i in r["Instances"]]


def db_rows(run_id: str) -> tuple[str, list[tuple[str, Any]], list[str]]:
    """(run state, [(instance id, terminated_at)], [event kinds]) straight from the test's database."""
    from gpuplan.store.db import Store
    from gpuplan.store.models import Run

    store = Store.open(os.environ["GPUPLAN_DB"])
    try:
        with store.session() as s:
            run = s.get(Run, run_id)
            assert run is not None
            return (run.state, [(i.provider_instance_id, i.terminated_at) for i in run.instances],
                    [e.kind for e in run.events])
    finally:
        store.close()


def only_run_id() -> str:
    from sqlalchemy import select

    from gpuplan.store.db import Store
    from gpuplan.store.models import Run

    store = Store.open(os.environ["GPUPLAN_DB"])
    try:
        with store.session() as s:
            [run_id] = s.scalars(select(Run.id)).all()
            return run_id
    finally:
        store.close()


def test_launch_status_reconcile_stop_on_a_moto_server(moto_server: MotoServer, job: Path) -> None:
    launched = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    out = launched.json()
    run_id = out["run_id"]
    assert out["provider"] == "aws" and out["state"] == "running"
    assert out["instance_type"] == "g5.xlarge" and out["region"] == "us-east-1"
    [inst] = live_tagged(moto_server, run_id)
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags["gpuplan:name"] == "moto-smoke" and tags["gpuplan:project"] == "demo"
    assert tags["gpuplan:created-by"] == "gpuplan" and inst["InstanceType"] == "g5.xlarge"
    assert [i["instance_id"] for i in out["instances"]] == [inst["InstanceId"]]
    assert inst["MetadataOptions"]["HttpTokens"] == "required"
    # The on-instance fail-safe: the boot script powers off at max_hours, and shutdown means terminate.
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_server.endpoint)
    user_data = user_data_of(ec2, inst["InstanceId"])
    assert "MAX_SECONDS=3600" in user_data and "shutdown -h now" in user_data and "RUN_ID=" + run_id in user_data
    behaviour = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"],
                                                Attribute="instanceInitiatedShutdownBehavior")
    assert behaviour["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"

    state, rows, events = db_rows(run_id)
    assert state == "running" and rows == [(inst["InstanceId"], None)]
    assert "launch_attempt" in events and "launched" in events

    agreed = gpuplan("reconcile", "--cloud", "aws", "--json")
    assert agreed.exit_code == 0, agreed.stderr
    assert agreed.json() == []

    stopped = gpuplan("stop", run_id, "--json")
    assert stopped.exit_code == 0, stopped.stderr
    summary = stopped.json()
    assert summary["state"] == "stopped"
    [row] = summary["instances"]
    assert row["terminated_at"] is not None and row["state"] == "terminated"
    # AWS bills at least 60 s: the g5.xlarge price for one minute at least.
    assert summary["cost_usd"] >= round(float(row["price_per_hour"]) / 60, 6) > 0
    assert live_tagged(moto_server, run_id) == []


def test_no_capacity_anywhere_prints_what_was_tried(moto_server: MotoServer, job: Path, faults_dir: Path,
                                                    tmp_path: Path) -> None:
    # A child-side hook that answers every RunInstances with EC2's capacity error (the server never sees it).
    (faults_dir / "sitecustomize.py").write_text(no_capacity_sitecustomize())
    result = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json",
                     env={"PYTHONPATH": str(faults_dir)})
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "error: no capacity for run" in result.stderr
    assert result.stderr.count("InsufficientInstanceCapacity") >= 6  # one table row per zone tried
    assert "us-east-1a" in result.stderr and "us-east-1f" in result.stderr
    run_id = only_run_id()
    state, rows, events = db_rows(run_id)
    assert state == "failed" and rows == []
    assert events.count("launch_attempt") >= 6
    assert live_tagged(moto_server) == []


@pytest.mark.parametrize(("fault", "orphans"), [
    ("before-run-instances", 0),
    ("after-run-instances", 1),  # the machine exists, the database has its run (provisioning) but not the machine
    ("after-commit", 0),  # recorded: the books know it, watch looks after it
])
def test_a_launch_killed_at_each_step_leaves_nothing_reconcile_cannot_find(
        moto_server: MotoServer, job: Path, faults_dir: Path, fault: str, orphans: int) -> None:
    killed = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json",
                     env={"PYTHONPATH": str(faults_dir), "GPUPLAN_TEST_FAULT": fault})
    assert killed.exit_code == -signal.SIGKILL, (killed.exit_code, killed.stderr)
    run_id = only_run_id()
    state, rows, _ = db_rows(run_id)
    assert state == ("running" if fault == "after-commit" else "provisioning")
    assert len(rows) == (1 if fault == "after-commit" else 0)

    # Default providers: every provider the books have runs on (aws here); the rows say what was found. Its run
    # still says provisioning, so the machine is never terminated whatever --grace says; the launching gpuplan is
    # dead (its pid is in the run's launch_plan event), so reconcile adopts the machine into its run.
    ended = gpuplan("reconcile", "--terminate", "-y", "--grace", "0", "--json")
    assert ended.exit_code == 0, ended.stderr
    rows_found = ended.json()
    assert [(r["kind"], r["run_id"], r["cloud"], r["region"], r["action"]) for r in rows_found] == \
        [("in-flight", run_id, "aws", "us-east-1", "adopted")] * orphans
    assert all(list(r) == ["cloud", "region", "instance_id", "run_id", "state", "kind", "age_s", "why", "action"]
               for r in rows_found)
    live = live_tagged(moto_server, run_id)
    assert len(live) == (1 if fault in ("after-commit", "after-run-instances") else 0)
    if not orphans:
        return
    # Adopted: the run is running with the machine's row (billed from its LaunchTime); `gpuplan stop` ends it.
    state, rows, events = db_rows(run_id)
    assert state == "running" and [i for i, _ in rows] == [live[0]["InstanceId"]] and "adopted" in events
    assert gpuplan("stop", run_id).exit_code == 0
    assert live_tagged(moto_server, run_id) == []
    assert gpuplan("reconcile", "--terminate", "-y", "--json").json() == []
    # Launching again starts exactly one new machine: the orphan is gone, nothing doubles up.
    again = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert again.exit_code == 0, again.stderr
    assert len(live_tagged(moto_server, again.json()["run_id"])) == 1
    assert len(live_tagged(moto_server)) == 1


def test_cli_killed_while_following_then_status_and_reconcile_agree(moto_server: MotoServer, job: Path) -> None:
    env = {**os.environ}
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "launch", str(job), "--provider", "aws", "-y",
                             "--interval", "0.2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not live_tagged(moto_server):
            time.sleep(0.2)
        time.sleep(1.0)  # past the commit, into following
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    run_id = only_run_id()
    status = gpuplan("status", run_id, "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["state"] == "running"
    assert [i["instance_id"] for i in status.json()["instances"]] == [i["InstanceId"] for i in live_tagged(moto_server)]


class Crash(BaseException):
    """Stands for the process dying: not an Exception, so nothing on the way catches it."""


def test_a_retried_launch_of_the_same_run_adopts_the_machines_it_started(moto_server: MotoServer,
                                                                        job: Path) -> None:
    """Crash between RunInstances and the database commit, then run the same launch again: one machine."""
    from gpuplan.jobs.spec import load_spec
    from gpuplan.launching.plan import plan_launch
    from gpuplan.launching.record import record_run
    from gpuplan.launching.start import launch_recorded_run
    from gpuplan.providers.aws.provider import AwsProvider
    from gpuplan.store.db import Store

    store = Store.open(os.environ["GPUPLAN_DB"])
    try:
        spec = load_spec(job)
        crashing = AwsProvider(waiter_delay=0.05)

        def crash(**_: Any) -> None:
            raise Crash

        crashing.launch_client("us-east-1").meta.events.register("after-call.ec2.RunInstances", crash)
        plan = plan_launch(spec, JOB, provider=crashing)
        run_id = record_run(store, plan)
        with pytest.raises(Crash):
            launch_recorded_run(store, run_id, plan, crashing, {})
        [orphan] = live_tagged(moto_server, run_id)
        assert db_rows(run_id)[:2] == ("provisioning", [])

        retried = launch_recorded_run(store, run_id, plan, AwsProvider(waiter_delay=0.05), {})
        assert [i.instance_id for i in retried] == [orphan["InstanceId"]]
        state, rows, _ = db_rows(run_id)
        assert state == "running" and rows == [(orphan["InstanceId"], None)]
        from sqlalchemy import select

        from gpuplan.store.models import Event

        with store.session() as session:
            attempts = [json.loads(e.data_json) for e in session.scalars(
                select(Event).where(Event.run_id == run_id, Event.kind == EventKind.LAUNCH_ATTEMPT).order_by(Event.id))]
        assert attempts[-1]["outcome"] == "existing" and attempts[-1]["instance_ids"] == [orphan["InstanceId"]]
        assert len(live_tagged(moto_server, run_id)) == 1
    finally:
        store.close()


def test_throttling_is_retried_with_the_same_token(moto_server: MotoServer) -> None:
    """RequestLimitExceeded twice, then moto answers: the launch succeeds, retried by launch_call (the launch client
    has botocore retries off, so a capacity refusal is never retried) with the same ClientToken."""
    from gpuplan.providers.aws.provider import AwsProvider
    from gpuplan.providers.base import LaunchRequest

    from support.awsmoto import Injector, inject

    aws = AwsProvider(waiter_delay=0.05, launch_retry_delay=0.01)
    injector = inject(aws.launch_client("us-east-1"), "RunInstances",
                      Injector("RequestLimitExceeded", "Request limit exceeded.", status=503,
                               when=lambda _: len(injector.calls) <= 2), server=True)
    [inst] = aws.launch(LaunchRequest(run_id="r-throttle01", name="t", command="true", run_dir="/tmp",
                                      instance_type="g5.xlarge", region="us-east-1", boot_script="#!/bin/sh\n"))
    assert injector.failed == 2 and len(injector.calls) == 3
    assert len({c["ClientToken"] for c in injector.calls}) == 1
    assert [i["InstanceId"] for i in live_tagged(moto_server, "r-throttle01")] == [inst.instance_id]


def test_tiny_gpt_example_launches_with_the_default_catalog_choice(moto_server: MotoServer, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`gpuplan launch examples/tiny-gpt.yaml --provider aws -y`: the planner's cheapest offer was in eu-south-2 (an
    opt-in region moto reports not-opted-in) and named its zone by id (eus2-az1); now planning leaves disabled
    regions out and the zone goes to EC2 as this account's zone name. (The example's `python tiny_gpt.py` needs its
    folder on the machine: a run storage ships it.)"""
    import boto3

    use_s3_storage(monkeypatch, tmp_path)
    example = Path(__file__).resolve().parents[2] / "examples" / "tiny-gpt.yaml"
    launched = gpuplan("launch", str(example), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    out = launched.json()
    region = out["region"]
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=moto_server.endpoint)
    status = {r["RegionName"]: r["OptInStatus"] for r in ec2.describe_regions(AllRegions=True)["Regions"]}
    assert status[region] != "not-opted-in"
    names = {z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    pages = ec2.describe_instances(Filters=[{"Name": f"tag:{TAG_RUN_ID}", "Values": [out["run_id"]]}])
    [inst] = [i for r in pages["Reservations"] for i in r["Instances"]]
    assert inst["Placement"]["AvailabilityZone"] in names
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags["kind"] == "example" and tags["gpuplan:project"] == "demo"  # the spec's labels are tags
    assert gpuplan("stop", out["run_id"]).exit_code == 0


# EC2's answer to credentials it cannot validate, to every call (HTTP 401).
AUTH_FAILURE = ec2_error_sitecustomize("AuthFailure", "AWS was not able to validate the provided access credentials",
                                       status=401)


def test_bad_credentials_end_the_launch_with_exit_2_before_anything_starts(moto_server: MotoServer, job: Path,
                                                                           faults_dir: Path) -> None:
    """Every EC2 call answers AuthFailure (HTTP 401), as EC2 does for credentials it cannot validate: the launch is
    refused while planning (DescribeRegions in the default region) with one line and exit 2, nothing started."""
    (faults_dir / "sitecustomize.py").write_text(AUTH_FAILURE)
    result = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json",
                     env={"PYTHONPATH": str(faults_dir)})
    assert result.exit_code == 2, result.stderr
    assert "AuthFailure" in result.stderr and result.stderr.count("\n") == 1
    assert live_tagged(moto_server) == []
