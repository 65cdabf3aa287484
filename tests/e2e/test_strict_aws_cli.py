"""The CLI as a child process against moto behind the strict AWS layer (tests/support/strict_aws/): the child reaches
AWS only through AWS_ENDPOINT_URL (the layer), so every documented rule the layer enforces applies to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.clihelp import Result, run_subprocess
from support.strict_aws.fixture import StrictAwsServer

pytestmark = pytest.mark.slow

JOB = """\
name: strict-smoke
runtime: process
command: python train.py --steps 100
resources:
  gpu: A10G:1
  regions: [us-east-1]
limits:
  max_hours: 1
project: demo
"""


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


def gpuplan(*args: str) -> Result:
    return run_subprocess(*args, timeout=120)


def test_cli_launch_and_stop_go_through_the_layer(strict_aws: StrictAwsServer, job: Path) -> None:
    launched = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    [run] = strict_aws.layer.calls("RunInstances")
    assert run.status == 200
    assert len(run.params["ClientToken"]) <= 64
    [instance] = launched.json()["instances"]
    assert strict_aws.moto_client("ec2").describe_instances(InstanceIds=[instance["instance_id"]])["Reservations"]
    stopped = gpuplan("stop", launched.json()["run_id"])
    assert stopped.exit_code == 0, stopped.stderr
    assert strict_aws.layer.calls("TerminateInstances")


def test_cli_moves_on_when_the_first_zone_has_no_capacity(strict_aws: StrictAwsServer, job: Path) -> None:
    """EC2's InsufficientInstanceCapacity (HTTP 500, retried by botocore unless the client says otherwise) in the
    first zone the CLI tries: the launch ends running in another zone."""
    strict_aws.layer.inject("InsufficientInstanceCapacity", zone="us-east-1a", times=None)
    launched = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    runs = strict_aws.layer.calls("RunInstances")
    assert [r.status for r in runs][-1] == 200
    assert any(r.status == 500 for r in runs)
    [instance] = launched.json()["instances"]
    placed = strict_aws.moto_client("ec2").describe_instances(InstanceIds=[instance["instance_id"]])
    assert placed["Reservations"][0]["Instances"][0]["Placement"]["AvailabilityZone"] != "us-east-1a"


def test_cli_asks_a_zone_without_capacity_once(strict_aws: StrictAwsServer, job: Path) -> None:
    strict_aws.layer.inject("InsufficientInstanceCapacity", zone="us-east-1a", times=None)
    launched = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    tries = [r for r in strict_aws.layer.calls("RunInstances") if r.params.get("Placement.AvailabilityZone")
             == "us-east-1a"]
    assert len(tries) == 1, [(r.params.get('InstanceType'), r.params.get('ClientToken')) for r in tries]
