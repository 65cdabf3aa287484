"""`gpuplan launch --provider azure` end to end: the CLI as a subprocess, the real Azure SDK clients, the fake ARM.

The CLI finds the fake as a user points Azure elsewhere: GPUPLAN_AZURE_ARM_ENDPOINT, AZURE_SUBSCRIPTION_ID and
REQUESTS_CA_BUNDLE for the fake's certificate; `DefaultAzureCredential` gets its token from the fake's App
Service managed-identity endpoint (IDENTITY_ENDPOINT + IDENTITY_HEADER): no credential double in the product.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from support.clihelp import run_subprocess
from support.fake_arm.fixture import RunningArm

JOB = """\
name: tiny-gpt-azure
image: ghcr.io/example/tiny-gpt:latest
command: python train.py --steps 200
project: research
resources:
  gpu: T4
  gpus_per_node: 1
  spot: true
  regions: [eastus]
limits:
  max_hours: 2
"""


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


def test_dry_run_calls_nothing_then_launch_status_and_stop_leave_nothing_in_azure(arm: RunningArm, job: Path) -> None:
    # One module-shared CLI flow (each command is a child process: they cost seconds each, so one run serves all).
    dry = run_subprocess("launch", str(job), "--provider", "azure", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "Standard_NC4as_T4_v3 eastus" in dry.stderr and "ubuntu-hpc" in dry.stderr
    assert arm.state.requests == []  # nothing called (and nothing recorded: `runs` below lists one run)

    result = run_subprocess("launch", str(job), "--provider", "azure", "-y", "--detach", "--json")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    run_id = out["run_id"]
    assert (out["provider"], out["state"], out["spot"]) == ("azure", "running", True)
    [row] = out["instances"]
    assert row["instance_id"] == f"gpuplan-{run_id}/gpuplan-{run_id}-0"

    [vm] = arm.state.vms()
    assert vm["tags"]["gpuplan:run-id"] == run_id and vm["tags"]["gpuplan:project"] == "research"
    assert vm["properties"]["hardwareProfile"]["vmSize"] == "Standard_NC4as_T4_v3"
    assert vm["properties"]["evictionPolicy"] == "Delete"
    script = base64.b64decode(vm["properties"]["osProfile"]["customData"]).decode()
    assert "ghcr.io/example/tiny-gpt:latest" in script and "169.254.169.254/metadata" in script

    status = run_subprocess("status", run_id, "--json")
    assert status.exit_code == 0 and status.json()["state"] == "running", status.stderr
    stop = run_subprocess("stop", run_id)
    assert stop.exit_code == 0, stop.stderr
    assert arm.state.leftovers() == []  # the VM, its NIC, disk, public IP, network and resource group
    [final] = run_subprocess("runs", "--json").json()
    assert (final["run_id"], final["state"]) == (run_id, "stopped")


def test_no_capacity_fails_cleanly_and_leaves_nothing(arm: RunningArm, job: Path) -> None:
    arm.state.fail_vm_create("AllocationFailed", times=100)
    result = run_subprocess("launch", str(job), "--provider", "azure", "-y", "--detach", "--json")
    assert result.exit_code == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "AllocationFailed" in result.stderr or "no capacity" in result.stderr
    assert [r["state"] for r in run_subprocess("runs", "--json").json()] == ["failed"]
    assert arm.state.leftovers() == []


def test_reconcile_finds_an_orphan_by_its_tags_and_terminates_it(arm: RunningArm) -> None:
    from decimal import Decimal

    from gpuplan.providers.azure.provider import AzureProvider
    from gpuplan.providers.base import LaunchRequest

    from support.fake_arm.fixture import StaticToken

    # A VM of a run the books never recorded (a launch killed before its commit), a day old.
    orphan_run = "r-0ff0ff0ff0"
    [orphan] = AzureProvider(credential=StaticToken()).launch(LaunchRequest(
        run_id=orphan_run, name="lost", command="true", run_dir="/tmp/lost", region="westeurope",
        instance_type="Standard_NC4as_T4_v3", price_per_hour=Decimal("0.5"), boot_script="#!/bin/bash\n"))
    [vm] = arm.state.vms()
    vm["properties"]["timeCreated"] = "2026-01-01T00:00:00.000000Z"

    # One child process: `--terminate` reports what it found (kind, machine, run, region) and what it did.
    ended = run_subprocess("reconcile", "--cloud", "azure", "--terminate", "-y", "--json")
    assert ended.exit_code == 0, ended.stderr
    [row] = ended.json()
    assert (row["kind"], row["instance_id"], row["run_id"], row["region"], row["action"]) == \
        ("orphan", orphan.instance_id, orphan_run, "westeurope", "terminated")
    assert arm.state.leftovers() == []


def test_az_storage_code_goes_up_the_vm_ends_itself_and_logs_come_back_from_blob(
        arm: RunningArm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec with `storage: az://...`: the launch ships the job's folder to Blob with the user's credential and
    tags the run's group with its storage; the machine's part (tested under bash in test_azure_storage.py) is
    played here: outputs in Blob, the exit-code tag, the VM deleting itself. `gpuplan logs` then fetches the log
    from Blob (the run ends succeeded) and gpuplan deletes what the VM left."""
    from support.fake_arm.vm_services import serve_vm_services

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    spec = folder / "job.yaml"
    spec.write_text(JOB + "storage: az://acct/runs/team\n")
    config = tmp_path / "config.toml"
    config.write_text('[providers.azure]\nidentity = "/subscriptions/s/resourceGroups/g/providers/'
                      'Microsoft.ManagedIdentity/userAssignedIdentities/m"\n')
    with serve_vm_services(tmp_path / "blob") as blob:
        bundle = tmp_path / "ca.pem"
        bundle.write_bytes(arm.ca_bundle.read_bytes() + blob.ca_bundle.read_bytes())
        env = {"GPUPLAN_CONFIG": str(config), "REQUESTS_CA_BUNDLE": str(bundle),
               "GPUPLAN_AZURE_BLOB_ENDPOINT": blob.storage_url}
        launched = run_subprocess("launch", str(spec), "--provider", "azure", "-y", "--detach", "--json", env=env)
        assert launched.exit_code == 0, launched.stderr
        run_id = launched.json()["run_id"]
        group = f"gpuplan-{run_id}"
        run_folder = f"team/{run_id}"
        assert arm.state.groups[group.lower()]["tags"]["gpuplan:storage"] == f"az://acct/runs/{run_folder}"
        assert ("acct", "runs", f"{run_folder}/code.tar.gz") in blob.state.blobs  # shipped by the launch
        assert ("PUT", "user") in blob.state.blob_callers
        [vm] = arm.state.vms()
        script = base64.b64decode(vm["properties"]["osProfile"]["customData"]).decode()
        assert f"az://acct/runs/{run_folder}/node-0" in script and f"{run_folder}/code.tar.gz" in script

        # The machine's end: outputs to Blob, the exit code on the group, the VM deleting itself.
        blob.state.blobs[("acct", "runs", f"{run_folder}/node-0/job.log")] = b"step 200 loss 1.9\n"
        blob.state.blobs[("acct", "runs", f"{run_folder}/node-0/exit.json")] = b'{"exit_code": 0}\n'
        arm.state.groups[group.lower()]["tags"]["gpuplan:exit-code-0"] = "0"
        arm.state.delete_vm(vm)
        logs = run_subprocess("logs", run_id, env=env)
        assert logs.exit_code == 0, logs.stderr
        assert logs.stdout == "step 200 loss 1.9\n"
        assert f"az://acct/runs/{run_folder}/node-0/job.log" in logs.stderr
    [final] = run_subprocess("runs", "--json").json()
    assert final["state"] == "succeeded", final
    arm.state.settle()  # Azure finishes an accepted delete whether or not the client stays to poll it
    assert arm.state.leftovers() == []  # the public IP, network and group went too
