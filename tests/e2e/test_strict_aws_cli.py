"""The CLI as a child process against moto behind the strict AWS layer (tests/support/strict_aws/): the child reaches
AWS only through AWS_ENDPOINT_URL (the layer), so every documented rule the layer enforces applies to it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
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


def test_cli_bills_a_spot_run_at_the_zone_price_history(strict_aws: StrictAwsServer, tmp_path: Path) -> None:
    """Spot as billed through the layer's DescribeSpotPriceHistory (rule 10), not moto's invented ~$0.00001/h: a
    spot run stopped at once is billed AWS's 60 s minimum at the price in effect at launch in its own zone."""
    since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
    for zone in ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"):
        strict_aws.layer.seed_spot_history("us-east-1", zone, "g5.xlarge", [(since, Decimal("0.9"))])
    path = tmp_path / "spot.yaml"
    path.write_text(JOB.replace("  regions: [us-east-1]\n", "  regions: [us-east-1]\n  spot: true\n"))
    launched = gpuplan("launch", str(path), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    assert (launched.json()["instance_type"], launched.json()["spot"]) == ("g5.xlarge", True)
    assert gpuplan("stop", launched.json()["run_id"]).exit_code == 0
    assert strict_aws.layer.calls("DescribeSpotPriceHistory")
    [row] = gpuplan("report", "--quoted", "--json").json()
    assert row["sources"] == ["aws: DescribeSpotPriceHistory"]
    assert row["billed_usd"] == pytest.approx(0.9 / 60, abs=1e-6)  # 60 s at $0.90/h
