"""A process job's code on a cloud machine (the CLI as a process, AWS as a moto server): refused when it could not
get there, shipped to the run's storage when it can."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from support.awsmoto import MotoServer, create_instance_profile
from support.clihelp import run_subprocess

JOB = """\
name: needs-code
runtime: process
command: python train.py --steps 3
resources:
  gpu: A10G:1
  regions: [us-east-1]
limits:
  max_hours: 1
{extra}
"""


def client(moto: MotoServer, service: str) -> Any:
    import boto3

    return boto3.client(service, region_name="us-east-1", endpoint_url=moto.endpoint)


def folder(tmp_path: Path, extra: str = "") -> Path:
    root = tmp_path / "job"
    root.mkdir()
    (root / "train.py").write_text("print('training')\n")
    (root / "secret-notes.txt").write_text("not for the machine\n")
    (root / ".gitignore").write_text("secret-notes.txt\n")
    (root / "job.yaml").write_text(JOB.format(extra=extra))
    return root / "job.yaml"


def test_a_process_job_whose_code_cannot_reach_the_machine_is_refused(moto_server: MotoServer,
                                                                       tmp_path: Path) -> None:
    result = run_subprocess("launch", str(folder(tmp_path)), "--provider", "aws", "-y", "--detach")
    assert result.exit_code == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot reach train.py" in lines[0] and "storage:" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    runs = run_subprocess("runs", "--json")
    assert runs.exit_code == 0 and runs.json() == [], runs.stdout  # nothing recorded, nothing started


def test_with_storage_the_folder_is_shipped_without_what_gitignore_excludes(moto_server: MotoServer,
                                                                             tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    client(moto_server, "s3").create_bucket(Bucket="code-bkt")
    monkeypatch.setenv("GPUPLAN_AWS_INSTANCE_PROFILE", create_instance_profile(client(moto_server, "iam")))
    result = run_subprocess("launch", str(folder(tmp_path, "storage: s3://code-bkt/runs")), "--provider", "aws",
                            "-y", "--detach", "--json")
    assert result.exit_code == 0, result.stderr
    run_id = result.json()["run_id"]
    body = client(moto_server, "s3").get_object(Bucket="code-bkt", Key=f"runs/{run_id}/code.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        assert sorted(tar.getnames()) == [".gitignore", "job.yaml", "train.py"]
