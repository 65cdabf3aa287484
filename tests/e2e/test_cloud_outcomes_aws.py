"""A cloud run that finishes on its own reports how it ended: AWS (moto server, the CLI as a subprocess).

What the boot script would upload is planted in moto's S3 under `gpuplan/<run_id>/node-0/`, then the instance
goes to `terminated` (as a shutdown with InstanceInitiatedShutdownBehavior=terminate does). `gpuplan status`
must then say succeeded/failed with the job's exit code, `gpuplan logs` print the shipped log, and the measured
throughput come from the shipped metrics. Secrets travel through SSM, never through user-data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuplan.providers.base import TAG_RUN_ID

from support.awsmoto import MotoServer, create_instance_profile, user_data_of
from support.clihelp import Result, run_subprocess

BUCKET = "gpuplan-outcomes"
SECRET = "hf_s3cr3t-$(touch PWNED)-'value'"

JOB = """\
name: outcome-smoke
runtime: process
command: python train.py --steps 100
secrets: [HF_TOKEN]
resources:
  gpu: A10G:1
  regions: [us-east-1]
limits:
  max_hours: 1
project: demo
"""

LOG = "step 1 loss 4.2\nstep 2 loss 3.9\ntraining done\n"
METRICS = "".join(json.dumps({"step": s, "tokens": s * 4096, "loss": 4.0 - s / 10, "time": 100.0 + s}) + "\n"
                  for s in range(1, 11))


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


def gpuplan(*args: str, **env: str) -> Result:
    return run_subprocess(*args, env={"HF_TOKEN": SECRET, **env}, timeout=120)


def client(moto: MotoServer, service: str) -> Any:
    import boto3

    return boto3.client(service, region_name="us-east-1", endpoint_url=moto.endpoint)


def launch(moto: MotoServer, job: Path) -> tuple[str, str]:
    # The job has a secret: its machine needs an instance profile, or the launch is refused (issue 20, item 7).
    profile = create_instance_profile(client(moto, "iam"))
    result = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json",
                     GPUPLAN_AWS_INSTANCE_PROFILE=profile)
    assert result.exit_code == 0, result.stderr
    run_id = result.json()["run_id"]
    [inst] = [i for r in client(moto, "ec2").describe_instances(
        Filters=[{"Name": f"tag:{TAG_RUN_ID}", "Values": [run_id]}])["Reservations"] for i in r["Instances"]]
    return run_id, inst["InstanceId"]


def ship(moto: MotoServer, run_id: str, exit_code: int) -> None:
    """What the boot script's ship() leaves in S3 when the job ends (job.log, metrics.jsonl, then exit.json)."""
    s3 = client(moto, "s3")
    prefix = f"gpuplan/{run_id}/node-0/"
    s3.put_object(Bucket=BUCKET, Key=prefix + "job.log", Body=LOG.encode())
    s3.put_object(Bucket=BUCKET, Key=prefix + "metrics.jsonl", Body=METRICS.encode())
    record = {"exit_code": exit_code, "ended_at": "2025-01-01T00:00:00Z", "reason": ""}
    s3.put_object(Bucket=BUCKET, Key=prefix + "exit.json", Body=json.dumps(record).encode())


def secret_names(moto: MotoServer, run_id: str) -> list[str]:
    found = client(moto, "ssm").get_parameters_by_path(Path=f"/gpuplan/{run_id}/", Recursive=True)
    return sorted(p["Name"] for p in found["Parameters"])


@pytest.fixture
def bucket(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> str:
    client(moto_server, "s3").create_bucket(Bucket=BUCKET)
    monkeypatch.setenv("GPUPLAN_AWS_BUCKET", BUCKET)
    return BUCKET


def test_secrets_are_in_ssm_not_in_user_data_and_are_deleted_after_stop(moto_server: MotoServer, job: Path,
                                                                          bucket: str) -> None:
    run_id, instance_id = launch(moto_server, job)
    ec2, ssm = client(moto_server, "ec2"), client(moto_server, "ssm")
    user_data = user_data_of(ec2, instance_id)
    assert "s3cr3t" not in user_data and SECRET not in user_data
    parameter = f"/gpuplan/{run_id}/HF_TOKEN"
    assert parameter in user_data and "aws ssm get-parameter --with-decryption" in user_data
    # The node ships to its own prefix of the configured bucket.
    assert f"STORAGE_URL=s3://{BUCKET}/gpuplan/{run_id}/node-0" in user_data
    stored = ssm.get_parameter(Name=parameter, WithDecryption=True)["Parameter"]
    assert stored["Value"] == SECRET and stored["Type"] == "SecureString"
    tags = {t["Key"]: t["Value"] for t in ssm.list_tags_for_resource(
        ResourceType="Parameter", ResourceId=parameter)["TagList"]}
    assert tags[TAG_RUN_ID] == run_id and tags["gpuplan:created-by"] == "gpuplan"

    stopped = gpuplan("stop", run_id, "--json")
    assert stopped.exit_code == 0, stopped.stderr
    assert secret_names(moto_server, run_id) == []


@pytest.mark.parametrize(("exit_code", "state"), [(0, "succeeded"), (3, "failed")])
def test_a_finished_instance_reports_its_exit_code_log_and_throughput(moto_server: MotoServer, job: Path,
                                                                      bucket: str, exit_code: int,
                                                                      state: str) -> None:
    run_id, instance_id = launch(moto_server, job)
    ship(moto_server, run_id, exit_code)
    client(moto_server, "ec2").terminate_instances(InstanceIds=[instance_id])  # the job's poweroff

    status = gpuplan("status", run_id, "--json")
    assert status.exit_code == 0, status.stderr
    final = status.json()
    assert (final["state"], final["exit_code"]) == (state, exit_code), final
    assert final["instances"][0]["terminated_at"] is not None
    # Throughput measured from the shipped metrics: 9 steps x 4096 tokens in 9 s.
    assert final["tokens_per_s"] == pytest.approx(4096.0)
    logs = gpuplan("logs", run_id)
    assert logs.exit_code == 0, logs.stderr
    assert logs.stdout == LOG
    assert secret_names(moto_server, run_id) == []  # the run's machines are gone: so are its secrets


def test_without_a_bucket_a_finished_run_is_lost_and_says_how_to_fix_it(moto_server: MotoServer,
                                                                         job: Path) -> None:
    run_id, instance_id = launch(moto_server, job)
    client(moto_server, "ec2").terminate_instances(InstanceIds=[instance_id])
    final = gpuplan("status", run_id, "--json").json()
    assert final["state"] == "lost" and final["exit_code"] is None
    assert "GPUPLAN_AWS_BUCKET" in final["state_reason"]
