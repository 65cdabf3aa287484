"""Issue 35, item 8: `gpuplan ssh RUN --config` writes `Host gpuplan-RUN` into a file ~/.ssh/config can Include,
checked by the real ssh client (`ssh -G`), and the entry goes when the run ends — AWS on a moto server."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from gpuplan.providers.base import TAG_RUN_ID

from support.awsmoto import MotoServer
from support.clihelp import run_subprocess

JOB = """\
name: ssh-me
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


def test_ssh_config_entry_is_written_and_removed_with_the_run(moto_server: MotoServer, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    launched = run_subprocess("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    [inst] = [i for r in client(moto_server, "ec2").describe_instances(
        Filters=[{"Name": f"tag:{TAG_RUN_ID}", "Values": [run_id]}])["Reservations"] for i in r["Instances"]]

    out = run_subprocess("ssh", run_id, "--config")
    assert out.exit_code == 0, out.stderr
    path = Path(out.stdout.strip())
    assert path == Path(os.environ["GPUPLAN_HOME"]) / "ssh" / f"gpuplan-{run_id}"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    include = next(line for line in out.stderr.split("once, before any Host): ")[1:]).strip()
    assert include == f"Include {path.parent}/gpuplan-*"
    # The real ssh client reads it through the Include line, as from ~/.ssh/config.
    user_config = tmp_path / "ssh_config"
    user_config.write_text(include + "\n")
    resolved = subprocess.run(["ssh", "-G", "-F", str(user_config), f"gpuplan-{run_id}"], capture_output=True,
                              text=True, check=True).stdout.lower()
    assert f"hostname {inst['InstanceId']}" in resolved and "user ubuntu" in resolved
    assert "proxycommand aws ssm start-session --region us-east-1 --target %h --document-name " \
           "aws-startsshsession --parameters portnumber=%p" in resolved

    client(moto_server, "ec2").terminate_instances(InstanceIds=[inst["InstanceId"]])
    status = run_subprocess("status", run_id, "--json")
    assert status.exit_code == 0 and status.json()["state"] not in ("running", "provisioning"), status.stdout
    assert not path.exists()
    ended = run_subprocess("ssh", run_id, "--config")
    assert ended.exit_code == 2 and "no machine to get into" in ended.stderr


def test_ssh_config_of_a_local_run_says_how_to_get_in(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: here\nruntime: process\ncommand: sleep 30\n")
    launched = run_subprocess("launch", str(job), "-y", "--detach", "--json")
    run_id = launched.json()["run_id"]
    try:
        out = run_subprocess("ssh", run_id, "--config")
        assert out.exit_code == 2 and "take no ssh login" in out.stderr and f"gpuplan ssh {run_id}" in out.stderr
    finally:
        run_subprocess("stop", run_id)
