"""A secret's value reaches the job and nothing else gpuplan writes, on every provider.

One launch per provider through the real CLI (in-process, with `-v`, so debug logging is on and captured) with a
secret set in the launching environment, then a look everywhere gpuplan keeps or shows things: every table and
column of the database (and the raw bytes of the database and its WAL), the events' data, every file in gpuplan's
home (run folders: launch.json, tags.json, the Slurm batch script, ...), the stdout and stderr of launch, status,
runs and logs (`--json` and human), the log records, a provider's error, and what the cloud keeps: AWS tags,
user-data and SSM parameter names (moto server), GCP labels and metadata (the fake Compute API; the value is kept
in Secret Manager, the fake of tests/support/fakes/secretmanager_server.py, and the startup script only names it).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from support.awsmoto import MotoServer, create_instance_profile, user_data_of
from support.clihelp import Result, run_cli
from support.fakes.gce_server import RunningFake
from support.fakes.secretmanager_server import RunningSecretManager

SECRET = "s3cr3t-VALUE-$(touch PWNED)-`id`-'q'"
MARK = "s3cr3t-VALUE"  # any fragment of the value is a leak
DIGEST = hashlib.sha256(SECRET.encode()).hexdigest()  # what the jobs print instead of the value
SPEC_SECRETS = "secrets: [API_TOKEN]\n"


def home() -> Path:
    return Path(os.environ["GPUPLAN_HOME"])


def db_file() -> Path:
    return Path(os.environ["GPUPLAN_DB"].removeprefix("sqlite:///"))


def table_dump() -> str:
    """Every row of every table, column by column (events.data_json included)."""
    con = sqlite3.connect(db_file())
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert {"runs", "instances", "events"} <= set(tables)
        lines = []
        for table in tables:
            for row in con.execute(f'SELECT * FROM "{table}"'):
                lines.append(f"{table}: " + " | ".join(str(v) for v in row))
        return "\n".join(lines)
    finally:
        con.close()


def cli(*args: str) -> Result:
    """The CLI in-process with -v: debug logging on (captured by caplog) and tracebacks on errors."""
    return run_cli("-v", *args)


def assert_nowhere(outputs: list[Result], caplog: pytest.LogCaptureFixture) -> None:
    dump = table_dump()
    assert "API_TOKEN" in dump  # the spec names the secret...
    assert MARK not in dump  # ...and no table holds its value
    for path in home().rglob("*"):
        if path.is_file():
            assert MARK.encode() not in path.read_bytes(), f"the secret's value is in {path}"
    for result in outputs:
        assert MARK not in result.stdout and MARK not in result.stderr, result
    assert MARK not in caplog.text
    assert not list(Path.cwd().glob("PWNED*"))


def queries(run_id: str) -> list[Result]:
    """What a user looks at after a launch: status, runs, logs, in both output forms."""
    results = [cli("status", run_id, "--json"), cli("status", run_id), cli("runs", "--json"), cli("runs"),
               cli("logs", run_id)]
    assert all(r.exit_code == 0 for r in results), [r.stderr for r in results]
    return results


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("API_TOKEN", SECRET)
    caplog.set_level(logging.DEBUG)


def test_local_launch(tmp_path: Path, secret_env: None, caplog: pytest.LogCaptureFixture) -> None:
    spec = write(tmp_path, "name: secret-local\nruntime: process\n" + SPEC_SECRETS
                 + 'command: printf %s "$API_TOKEN" | sha256sum\n')
    human = cli("launch", str(spec), "-y", "--interval", "0.2")
    assert human.exit_code == 0, human.stderr
    launched = cli("launch", str(spec), "-y", "--json", "--interval", "0.2")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    outputs = [human, launched, *queries(run_id)]
    assert DIGEST in outputs[-1].stdout  # the job got the value
    assert_nowhere(outputs, caplog)


def test_aws_launch_and_a_failed_one(tmp_path: Path, moto_server: MotoServer, secret_env: None,
                                     monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import boto3

    spec = write(tmp_path, "name: secret-aws\nruntime: process\ncommand: python train.py\n" + SPEC_SECRETS
                 + "resources:\n  gpu: A10G:1\n  regions: [us-east-1]\nlimits:\n  max_hours: 1\n")
    # Secrets need an instance profile on the machine, or the launch is refused (issue 20, item 7).
    monkeypatch.setenv("GPUPLAN_AWS_INSTANCE_PROFILE", create_instance_profile(boto3.client("iam")))
    launched = cli("launch", str(spec), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    ec2 = boto3.client("ec2", region_name="us-east-1")
    ssm = boto3.client("ssm", region_name="us-east-1")
    instances = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert instances
    for inst in instances:
        user_data = user_data_of(ec2, inst["InstanceId"])
        assert MARK not in user_data
        assert all(MARK not in t["Key"] + t["Value"] for t in inst["Tags"])
    names = [p["Name"] for p in ssm.describe_parameters()["Parameters"]]
    assert f"/gpuplan/{run_id}/API_TOKEN" in names and all(MARK not in n for n in names)
    outputs = [launched, *queries(run_id)]

    # A provider error while a secret is set: the message, the -v traceback and the failure event stay clean.
    # (the AMI parameter is read after the secrets are put in SSM: they must be gone again too).
    monkeypatch.delenv("GPUPLAN_AWS_IMAGE_ID")
    monkeypatch.setenv("GPUPLAN_AWS_AMI_PARAMETER", "/gpuplan-test/no-such-ami")
    failed = cli("launch", str(spec), "--provider", "aws", "-y", "--detach", "--json")
    assert failed.exit_code != 0 and "no-such-ami" in failed.stderr
    assert [p["Name"] for p in ssm.describe_parameters()["Parameters"]] == [f"/gpuplan/{run_id}/API_TOKEN"]
    assert_nowhere([*outputs, failed], caplog)


def test_gcp_launch_and_a_failed_one(tmp_path: Path, gce: RunningFake, secretmanager: RunningSecretManager,
                                     secret_env: None, caplog: pytest.LogCaptureFixture) -> None:
    spec = write(tmp_path, "name: secret-gcp\nimage: us-docker.pkg.dev/x/y:1\ncommand: python train.py\n"
                 + SPEC_SECRETS + "resources:\n  gpu: L4\n  gpus_per_node: 1\n  regions: [us-central1]\n"
                 + "limits:\n  max_hours: 1\n")
    launched = cli("launch", str(spec), "--provider", "gcp", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    [vm] = gce.state.live()
    # The value is kept in Secret Manager (labelled like the run); the VM's metadata only names the secret.
    secret = f"gpuplan-{run_id}-API_TOKEN"
    metadata = {i["key"]: i["value"] for i in vm["metadata"]["items"]}
    assert f"SECRET_PARAMS=(projects/gpuplan-test/secrets/{secret})" in metadata["startup-script"]
    assert MARK not in str(metadata) and MARK not in str(vm["labels"])
    assert MARK not in str(vm["disks"]) and MARK not in vm["name"]
    assert secretmanager.state.value(secret) == SECRET.encode()
    labels = secretmanager.state.get(secret).labels
    assert labels["gpuplan-created-by"] == "gpuplan" and labels["gpuplan-run-id"] == run_id
    assert MARK not in str(labels)
    outputs = [launched, *queries(run_id)]

    # A launch that fails after its secrets were stored deletes them again; the error and logs stay clean.
    for zone in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"):
        gce.state.fail_http(zone, 403, "forbidden", times=None)
    failed = cli("launch", str(spec), "--provider", "gcp", "-y", "--detach", "--json")
    assert failed.exit_code != 0 and "error:" in failed.stderr
    assert list(secretmanager.state.secrets) == [secret]  # the failed run's secret came and went
    assert [d for d in secretmanager.state.deleted if d != secret]
    assert_nowhere([*outputs, failed], caplog)


def test_slurm_launch(tmp_path: Path, slurm: Any, secret_env: None, monkeypatch: pytest.MonkeyPatch,
                      caplog: pytest.LogCaptureFixture) -> None:
    for key, value in slurm.env().items():
        monkeypatch.setenv(key, value)
    spec = write(tmp_path, "name: secret-slurm\nruntime: process\n" + SPEC_SECRETS
                 + 'command: printf %s "$API_TOKEN" | sha256sum\nlimits:\n  max_hours: 0.5\n')
    launched = cli("launch", str(spec), "--provider", "slurm", "-y", "--json", "--interval", "0.3")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    outputs = [launched, *queries(run_id)]
    assert DIGEST in outputs[-1].stdout
    assert_nowhere(outputs, caplog)
