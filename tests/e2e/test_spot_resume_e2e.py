"""A spot run survives its machine: interrupted mid-run, relaunched, restored, finished with exactly its steps.

Everything real but the cloud: the CLI is a separate process against a moto server (EC2, S3, IAM); each "machine"
is the boot script gpuplan put in the instance's user data, run here with bash, with the AWS CLI copying
checkpoints to moto's S3 and the interruption notice served by a fake IMDSv2 on 127.0.0.1. The test only
stands in for the machine's surroundings: the metadata service's link-local address, the machine's own disk (a
fresh folder per machine), its GPU (the job trains on CPU), no power-off (the test plays EC2 and terminates the
instance itself).

1. `gpuplan launch` a spot tiny-GPT job (`python tiny_gpt.py` next to its spec) with `storage: s3://.../runs`
   and a checkpoint dir: its folder is packed (without what .gitignore excludes) into the run's storage.
2. Machine 1 runs the user data; mid-run the fake IMDS announces the interruption: the boot script SIGTERMs the
   job, which saves its step, and copies the checkpoint and the metrics to S3; EC2 (the test) then terminates the
   instance with the spot reason.
3. `gpuplan status` sees the preemption and relaunches (a new instance, new user data).
4. Machine 2 (empty disk) restores the checkpoint from S3 and trains the remaining steps; it powers off (the test
   terminates the instance), and `gpuplan status` says succeeded.
The steps of both machines add up to the requested steps, and the loss curve continues where it stopped.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from gpuplan.providers.aws import iam as aws_iam
from gpuplan.providers.base import TAG_RUN_ID

from support.awsmoto import MotoServer, create_instance_profile, spot_interrupt, user_data_of
from support.clihelp import Result, run_subprocess
from support.fakes.interruption_metadata import ServedMetadata, serve_interruption_metadata
from support.reaper import reap
from support.s3_policy import S3Request, allowed, requests_in_log

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STEPS = 240
OUTPUTS = "gpuplan-outputs"
CHECKPOINTS = "gpuplan-ckpts"

JOB = f"""\
name: tiny-gpt-spot
runtime: process
command: python tiny_gpt.py --steps {STEPS} --batch 8 --seq-len 32 --checkpoint-every 1000
env: {{OMP_NUM_THREADS: "1"}}
resources:
  gpu: A10G:1
  spot: true
  regions: [us-east-1]
checkpoint: {{dir: ckpt, interval: 1h}}
storage: s3://{CHECKPOINTS}/runs
limits:
  max_hours: 1
"""


def client(moto: MotoServer, service: str) -> Any:
    import boto3

    return boto3.client(service, region_name="us-east-1", endpoint_url=moto.endpoint)


def gpuplan(*args: str) -> Result:
    return run_subprocess(*args, timeout=120)


def as_this_machine(script: str, base: Path, metadata: ServedMetadata) -> str:
    """The user data, with the machine's surroundings swapped for the test's (each line must be there once)."""
    swaps = {"BASE_DIR=/var/lib/gpuplan": f"BASE_DIR={base}",
             "IMDS_URL=http://169.254.169.254": f"IMDS_URL={metadata.imds_url}",
             "EXPECTED_GPUS=1": "EXPECTED_GPUS=0",  # the A10G is the cloud's; this machine trains on CPU
             "POWEROFF=1": "POWEROFF=0", "COUNT_FROM_BOOT=1": "COUNT_FROM_BOOT=0", "NOTICE_POLL=5": "NOTICE_POLL=1"}
    lines = script.splitlines()
    for old, new in swaps.items():
        assert lines.count(old) == 1, old
        lines[lines.index(old)] = new
    return "\n".join(lines) + "\n"



@pytest.fixture(autouse=True)
def no_job_outlives_its_test(tmp_path: Path) -> Any:
    """The machines' jobs run in their own session (see support.reaper): none may outlive the test."""
    yield
    reap(tmp_path)

def boot(moto: MotoServer, instance_id: str, base: Path, metadata: ServedMetadata) -> subprocess.Popen[bytes]:
    """Start a machine: its user data, run as root would at boot (here: with the AWS CLI pointed at moto)."""
    base.mkdir(parents=True)
    script = base.parent / f"{base.name}.sh"
    script.write_text(as_this_machine(user_data_of(client(moto, "ec2"), instance_id), base, metadata))
    env = {**os.environ, **moto.env(), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.Popen(["bash", str(script)], env=env, start_new_session=True)


def instances(moto: MotoServer, run_id: str) -> list[dict[str, Any]]:
    found = client(moto, "ec2").describe_instances(Filters=[{"Name": f"tag:{TAG_RUN_ID}", "Values": [run_id]}])
    return sorted((i for r in found["Reservations"] for i in r["Instances"]), key=lambda i: i["LaunchTime"])


def metrics(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def wait_for(what: str, condition: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def relaunch_events(run_id: str) -> list[dict[str, Any]]:
    """The data of the run's `relaunch` events, read from the books (the CLI's database)."""
    path = os.environ["GPUPLAN_DB"].removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT data_json FROM events WHERE run_id = ? AND kind = 'relaunch'", (run_id,))
        return [json.loads(text) for (text,) in rows]


def machine_requests(caplog: pytest.LogCaptureFixture, since: int) -> list[S3Request]:
    """The S3 requests moto served (its access log) from record `since` on, to the run's two buckets."""
    return requests_in_log([r.getMessage() for r in caplog.records[since:]], {OUTPUTS, CHECKPOINTS})


def test_an_interrupted_spot_run_resumes_from_its_checkpoint_and_trains_exactly_its_steps(
        moto_server: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="werkzeug")
    machines_made: list[S3Request] = []
    for bucket in (OUTPUTS, CHECKPOINTS):
        client(moto_server, "s3").create_bucket(Bucket=bucket)
    monkeypatch.setenv("GPUPLAN_AWS_BUCKET", OUTPUTS)
    monkeypatch.setenv("GPUPLAN_AWS_INSTANCE_PROFILE", create_instance_profile(client(moto_server, "iam")))
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "tiny_gpt.py").write_text((ROOT / "examples" / "tiny_gpt.py").read_text())
    (folder / ".gitignore").write_text("*.pt\ndata/\n")
    (folder / "data").mkdir()
    (folder / "data" / "big.bin").write_bytes(b"0" * 1000)  # ignored: never shipped
    job = folder / "job.yaml"
    job.write_text(JOB)
    launched = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    [first] = instances(moto_server, run_id)
    user_data = user_data_of(client(moto_server, "ec2"), first["InstanceId"])
    assert f"CKPT_URL=s3://{CHECKPOINTS}/runs/{run_id}/checkpoints" in user_data
    assert "INTERRUPTION_WATCH=aws" in user_data
    code = client(moto_server, "s3").get_object(Bucket=CHECKPOINTS, Key=f"runs/{run_id}/code.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(code)) as tar:
        assert sorted(tar.getnames()) == [".gitignore", "job.yaml", "tiny_gpt.py"]

    # Machine 1: trains until the interruption notice, saves, copies the checkpoint, ends.
    with serve_interruption_metadata() as metadata:
        since = len(caplog.records)
        machine = boot(moto_server, first["InstanceId"], tmp_path / "machine-1", metadata)
        try:
            wait_for("30 steps on machine 1", lambda: any(
                m["step"] >= 30 for m in metrics(tmp_path / "machine-1" / "run" / "metrics.jsonl")))
            metadata.state.announce("terminate")
            assert machine.wait(timeout=120) == 143  # the job's own exit after saving on SIGTERM
        finally:
            if machine.poll() is None:
                os.killpg(machine.pid, 9)
        machines_made += machine_requests(caplog, since)
    log1 = (tmp_path / "machine-1" / "run" / "job.log").read_text()
    assert "interruption notice from the cloud (terminate)" in log1 and "checkpoints copied" in log1, log1
    saved = int(log1.split("stopped by signal 15 at step ")[1].split(":")[0])
    assert 30 <= saved < STEPS
    stored = client(moto_server, "s3").list_objects_v2(Bucket=CHECKPOINTS, Prefix=f"runs/{run_id}/")
    keys = {o["Key"] for o in stored.get("Contents", [])}
    assert f"runs/{run_id}/checkpoints/tiny-gpt.pt" in keys and f"runs/{run_id}/node-0/metrics.jsonl" in keys

    # EC2 takes the machine; the next watch step relaunches.
    spot_interrupt(first["InstanceId"])
    status = gpuplan("status", run_id, "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["state"] == "running", status.json()
    # The books say where the relaunch resumes and what was lost: the job saved on the notice, so nothing.
    assert (status.json()["resumed"] or "").startswith(f"resumed from step {saved} (checkpoint of "), status.json()
    assert "steps lost" not in status.json()["resumed"]
    shown = gpuplan("status", run_id)
    assert f"resumed from step {saved} (checkpoint of " in shown.stdout, shown.stdout
    [relaunch] = relaunch_events(run_id)
    assert (relaunch["resumed_from_step"], relaunch["lost_steps"]) == (saved, 0), relaunch
    assert relaunch["notice"]["action"] == "terminate" and relaunch["notice"]["cloud"] == "aws", relaunch
    second = instances(moto_server, run_id)[-1]
    assert second["InstanceId"] != first["InstanceId"]

    # Machine 2: a fresh disk; restores from S3 and trains the rest.
    with serve_interruption_metadata() as metadata:
        since = len(caplog.records)
        machine = boot(moto_server, second["InstanceId"], tmp_path / "machine-2", metadata)
        try:
            assert machine.wait(timeout=300) == 0, (tmp_path / "machine-2" / "run" / "job.log").read_text()
        finally:
            if machine.poll() is None:
                os.killpg(machine.pid, 9)
        machines_made += machine_requests(caplog, since)
    log2 = (tmp_path / "machine-2" / "run" / "job.log").read_text()
    assert "restored checkpoints from the run's storage" in log2 and "unpacked the job's code" in log2
    assert f"at step {saved}" in log2 and f"({STEPS - saved} steps this run)" in log2, log2
    assert f"({saved} steps this run)" in log1  # saved + (STEPS - saved): exactly the requested steps

    # One loss curve across both machines: steps only go forward, the last is STEPS, and the loss after the
    # resume continues from where it was (a fresh start would be back near ln(1024) = 6.9).
    curve = metrics(tmp_path / "machine-2" / "run" / "metrics.jsonl")
    steps = [m["step"] for m in curve]
    assert steps == sorted(steps) and steps[-1] == STEPS and saved in steps
    before = next(m["loss"] for m in curve if m["step"] == saved)
    after = next(m["loss"] for m in curve if m["step"] > saved)
    assert after < before + 0.5 and after < curve[0]["loss"] - 1.0, curve

    # moto let every request through; the role gpuplan creates (least privilege) must have allowed each too.
    role = aws_iam.instance_policy(OUTPUTS, storage=f"s3://{CHECKPOINTS}/runs")
    assert {r.action for r in machines_made} >= {"s3:ListBucket", "s3:GetObject", "s3:PutObject"}
    assert [r for r in machines_made if not allowed(role, r)] == []

    client(moto_server, "ec2").terminate_instances(InstanceIds=[second["InstanceId"]])  # its power-off
    final = gpuplan("status", run_id, "--json")
    assert final.exit_code == 0, final.stderr
    assert (final.json()["state"], final.json()["exit_code"]) == ("succeeded", 0), final.json()

    # The checkpoints outlive the run: listed and downloaded from the storage.
    listed = gpuplan("checkpoints", run_id, "--json")
    assert listed.exit_code == 0, listed.stderr
    assert listed.json()["location"] == f"s3://{CHECKPOINTS}/runs/{run_id}/checkpoints"
    assert [f["name"] for f in listed.json()["files"]] == ["tiny-gpt.pt"]
    fetched = gpuplan("checkpoints", run_id, "--download", str(tmp_path / "dl"))
    assert fetched.exit_code == 0, fetched.stderr
    import torch

    assert torch.load(tmp_path / "dl" / "tiny-gpt.pt", weights_only=True)["step"] == STEPS

