"""Issue 35, item 3: `gpuplan logs` on a cloud run says where its log comes from and when the next copy lands,
and `logs -f` follows the shipped log as it grows — AWS on a moto server, the CLI in child processes.

What the boot script's ship() would upload is put in moto's S3 under `gpuplan/<run_id>/node-0/` by the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuplan.providers.base import TAG_RUN_ID

from support.awsmoto import MotoServer, create_instance_profile
from support.clihelp import Result, run_subprocess

BUCKET = "gpuplan-logs"
JOB = """\
name: log-shipper
runtime: process
command: python train.py
resources:
  gpu: A10G:1
  regions: [us-east-1]
limits:
  max_hours: 1
"""


def client(moto: MotoServer, service: str) -> Any:
    import boto3

    return boto3.client(service, region_name="us-east-1", endpoint_url=moto.endpoint)


def launch(moto: MotoServer, tmp_path: Path) -> tuple[str, str]:
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    profile = create_instance_profile(client(moto, "iam"))  # machines that ship outputs need one
    result = run_subprocess("launch", str(job), "--provider", "aws", "-y", "--detach", "--json",
                            env={"GPUPLAN_AWS_INSTANCE_PROFILE": profile})
    assert result.exit_code == 0, result.stderr
    run_id = result.json()["run_id"]
    [inst] = [i for r in client(moto, "ec2").describe_instances(
        Filters=[{"Name": f"tag:{TAG_RUN_ID}", "Values": [run_id]}])["Reservations"] for i in r["Instances"]]
    return run_id, inst["InstanceId"]


def ship_log(moto: MotoServer, run_id: str, text: str) -> None:
    client(moto, "s3").put_object(Bucket=BUCKET, Key=f"gpuplan/{run_id}/node-0/job.log", Body=text.encode())


@pytest.fixture
def bucket(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> str:
    client(moto_server, "s3").create_bucket(Bucket=BUCKET)
    monkeypatch.setenv("GPUPLAN_AWS_BUCKET", BUCKET)
    return BUCKET


def test_logs_of_a_live_aws_run_say_where_they_come_from(moto_server: MotoServer, bucket: str,
                                                          tmp_path: Path) -> None:
    run_id, _ = launch(moto_server, tmp_path)
    before = run_subprocess("logs", run_id)
    assert before.exit_code == 0, before.stderr
    where = f"s3://{BUCKET}/gpuplan/{run_id}/node-0/job.log"
    assert where in before.stderr and "first copy within 60 s" in before.stderr
    ship_log(moto_server, run_id, "step 1 loss 4.2\n")
    out = run_subprocess("logs", run_id)
    assert out.exit_code == 0, out.stderr
    assert out.stdout == "step 1 loss 4.2\n"
    assert where in out.stderr and "shipped every 60 s" in out.stderr and "the next lands by" in out.stderr


def test_logs_without_a_bucket_say_why_there_is_none(moto_server: MotoServer, tmp_path: Path) -> None:
    run_id, _ = launch(moto_server, tmp_path)
    out = run_subprocess("logs", run_id)
    assert out.exit_code == 0
    assert out.stdout == "" and "ship no log" in out.stderr and "GPUPLAN_AWS_BUCKET" in out.stderr


def test_logs_follow_the_shipped_log_as_it_grows(moto_server: MotoServer, bucket: str, tmp_path: Path) -> None:
    run_id, instance_id = launch(moto_server, tmp_path)
    ship_log(moto_server, run_id, "step 1\n")
    follower = subprocess.Popen([sys.executable, "-m", "gpuplan", "logs", run_id, "-f"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == "step 1\n"
        ship_log(moto_server, run_id, "step 1\nstep 2\n")  # the next copy: the whole log, grown
        assert follower.stdout.readline() == "step 2\n"
        ship_log(moto_server, run_id, "step 1\nstep 2\ndone\n")
        record = {"exit_code": 0, "ended_at": "2026-01-01T00:00:00Z", "reason": ""}
        client(moto_server, "s3").put_object(Bucket=BUCKET, Key=f"gpuplan/{run_id}/node-0/exit.json",
                                             Body=json.dumps(record).encode())
        client(moto_server, "ec2").terminate_instances(InstanceIds=[instance_id])  # the job's poweroff
        rest, err = follower.communicate(timeout=90)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    assert rest == "done\n"
    assert f"s3://{BUCKET}/gpuplan/{run_id}/node-0/job.log" in err


def test_logs_of_an_ended_run_name_the_last_copy(moto_server: MotoServer, bucket: str, tmp_path: Path) -> None:
    run_id, instance_id = launch(moto_server, tmp_path)
    ship_log(moto_server, run_id, "all done\n")
    client(moto_server, "ec2").terminate_instances(InstanceIds=[instance_id])
    status = run_subprocess("status", run_id, "--json")
    assert status.exit_code == 0 and status.json()["state"] not in ("running", "provisioning"), status.stdout
    out: Result = run_subprocess("logs", run_id)
    assert out.stdout == "all done\n" and "the last copy its machines shipped" in out.stderr, out.stderr


def test_a_cloud_runs_failed_setup_is_named_from_its_shipped_log(moto_server: MotoServer, bucket: str,
                                                                  tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB.replace("command: python train.py\n", "setup: pip install nothing-here\n"
                                                              "command: python train.py\n"))
    profile = create_instance_profile(client(moto_server, "iam"))
    launched = run_subprocess("launch", str(job), "--provider", "aws", "-y", "--detach", "--json",
                              env={"GPUPLAN_AWS_INSTANCE_PROFILE": profile})
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    [inst] = [i for r in client(moto_server, "ec2").describe_instances(
        Filters=[{"Name": f"tag:{TAG_RUN_ID}", "Values": [run_id]}])["Reservations"] for i in r["Instances"]]
    # What the machine's job.log holds after `with_setup` ran a failing setup (gpuplan.jobs.setup_step)
    ship_log(moto_server, run_id, "[gpuplan setup] node 0: setup started\n"
                                  "ERROR: No matching distribution found for nothing-here\n"
                                  "[gpuplan setup] failed with exit 1\n")
    client(moto_server, "s3").put_object(Bucket=BUCKET, Key=f"gpuplan/{run_id}/node-0/exit.json",
                                         Body=json.dumps({"exit_code": 1, "ended_at": None, "reason": ""}).encode())
    client(moto_server, "ec2").terminate_instances(InstanceIds=[inst["InstanceId"]])
    final = run_subprocess("status", run_id, "--json").json()
    assert final["state"] == "failed"
    assert final["state_reason"].startswith("setup failed (exit 1), the command never ran: ERROR: No matching"), final
