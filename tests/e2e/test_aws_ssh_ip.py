"""`gpuplan ssh/exec --via ip` on AWS through the CLI, against moto behind the strict AWS layer: port 22 is opened to
one address by adding gpuplan's SSH group to the machine's interface (keeping its groups), `--print` changes
nothing, a second call opens nothing new. `ssh` itself is a stand-in that reports its arguments."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from support.clihelp import Result, run_subprocess
from support.strict_aws.fixture import StrictAwsServer

pytestmark = pytest.mark.slow

JOB = """\
name: ssh-me
runtime: process
command: sleep 600
resources:
  gpu: A10G:1
  regions: [us-east-1]
limits:
  max_hours: 1
"""
ADDRESS = "203.0.113.7"


def gpuplan(*args: str, env: dict[str, str] | None = None) -> Result:
    return run_subprocess(*args, env=env, timeout=120)


def interface_groups(strict_aws: StrictAwsServer, instance_id: str) -> list[str]:
    ec2 = strict_aws.moto_client("ec2")
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return [g["GroupId"] for g in instance["NetworkInterfaces"][0]["Groups"]]


def test_ssh_via_ip_opens_port_22_to_one_address(strict_aws: StrictAwsServer, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    launched = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    [instance] = launched.json()["instances"]
    instance_id = instance["instance_id"]
    ec2 = strict_aws.moto_client("ec2")
    public_ip = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["PublicIpAddress"]
    before = interface_groups(strict_aws, instance_id)

    printed = gpuplan("ssh", run_id, "--via", "ip", "--print")
    assert printed.exit_code == 0, printed.stderr
    assert printed.stdout.startswith(f"ssh -t ubuntu@{public_ip} ") or printed.stdout.startswith(
        f"ssh ubuntu@{public_ip} ")
    assert interface_groups(strict_aws, instance_id) == before  # --print opened nothing
    assert not strict_aws.layer.calls("ModifyNetworkInterfaceAttribute")

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_ssh = bin_dir / "ssh"
    fake_ssh.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$SSH_ARGS"\n')
    fake_ssh.chmod(fake_ssh.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUPLAN_AWS_SSH_FROM": ADDRESS,
           "SSH_ARGS": str(tmp_path / "ssh-args")}
    out = gpuplan("exec", run_id, "--via", "ip", "--", "nvidia-smi", "-L", env=env)
    assert out.exit_code == 0, out.stderr
    assert f"port 22 opened to {ADDRESS}/32 only" in out.stderr
    args = (tmp_path / "ssh-args").read_text().splitlines()
    assert args[0] == f"ubuntu@{public_ip}" and "nvidia-smi -L" in args[1] and f"gpuplan-{run_id}-0" in args[1]

    after = interface_groups(strict_aws, instance_id)
    [added] = set(after) - set(before)
    assert set(before) < set(after) and len(after) == len(before) + 1  # the machine's own groups are kept
    [group] = ec2.describe_security_groups(GroupIds=[added])["SecurityGroups"]
    [rule] = group["IpPermissions"]
    assert (rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) == ("tcp", 22, 22)
    assert [r["CidrIp"] for r in rule["IpRanges"]] == [f"{ADDRESS}/32"]
    assert {t["Key"]: t["Value"] for t in group["Tags"]}["gpuplan:created-by"] == "gpuplan"

    again = gpuplan("ssh", run_id, "--via", "ip", env=env)
    assert again.exit_code == 0 and "already open" in again.stderr
    assert len(strict_aws.layer.calls("ModifyNetworkInterfaceAttribute")) == 1
    assert gpuplan("stop", run_id).exit_code == 0
