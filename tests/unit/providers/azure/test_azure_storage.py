"""A spec's `storage: az://ACCOUNT/CONTAINER/PREFIX` on Azure, end to end through the real parts: the provider takes
the scheme, the launch tags the run's group with the run's storage folder, the packed code goes up with the
user's credential (Put Blob), the rendered boot script run by bash unpacks it, restores the checkpoints an
earlier machine left, runs the job and pushes its checkpoints and outputs with the VM's managed-identity token,
and a fresh provider (another process, as `gpuplan logs` / `watch` would be) finds the storage from the group's
tag and fetches the node's log, metrics and exit record back with the user's credential."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.errors import UserError
from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.jobs.code_bundle import bundle
from gpuplan.jobs.storage import checkpoint_url, code_url, run_storage_url, storage_misfit
from gpuplan.providers.azure.provider import AzureProvider
from gpuplan.providers.base import Instance, InstanceState, LaunchRequest
from gpuplan.providers.registry import storage_schemes
from gpuplan.providers.stored_files import list_files, upload

from support.fake_arm.fixture import RunningArm, StaticToken
from support.fake_arm.vm_services import RunningVmServices, serve_vm_services
from support.reaper import reap

RUN = "r-azstore"
GROUP = f"gpuplan-{RUN}"
VM = f"gpuplan-{RUN}-0"
STORAGE = "az://acct/runs/team"
IDENTITY = "/subscriptions/s/resourceGroups/g/providers/Microsoft.ManagedIdentity/userAssignedIdentities/m"

# Resumes from $GPUPLAN_CHECKPOINT_DIR/step, counts to 8 with a metrics line per step, uses the shipped code.
JOB = r"""
ck="$GPUPLAN_CHECKPOINT_DIR"; mkdir -p "$ck"
step=$(cat "$ck/step" 2>/dev/null || echo 0)
echo "resumed at $step"; cat train.py
while [ "$step" -lt 8 ]; do step=$((step + 1)); echo "{\"step\": $step}" >> "$GPUPLAN_METRICS"; done
echo "$step" > "$ck/step"
"""


@pytest.fixture(autouse=True)
def no_job_outlives_its_test(tmp_path: Path) -> Iterator[None]:
    yield
    reap(tmp_path)


@pytest.fixture
def services(tmp_path: Path, arm: RunningArm, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningVmServices]:
    with serve_vm_services(tmp_path / "vm-services") as running:
        running.state.compute.update(subscriptionId=arm.state.subscription, resourceGroupName=GROUP, name=VM)
        running.state.page_size = 2  # every listing below spans pages
        bundle_file = tmp_path / "ca.pem"  # both fakes' certificates, for curl and for azure-core (requests)
        bundle_file.write_bytes(arm.ca_bundle.read_bytes() + running.ca_bundle.read_bytes())
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle_file))
        monkeypatch.setenv("GPUPLAN_AZURE_BLOB_ENDPOINT", running.storage_url)
        yield running


def test_azure_takes_az_storage_and_only_that() -> None:
    assert AzureProvider.storage_schemes == ("az",)
    assert "az" in storage_schemes()  # `[defaults] storage = "az://..."` passes `gpuplan config`
    assert storage_misfit(STORAGE, "azure", AzureProvider.storage_schemes) is None
    assert "az:// prefix" in (storage_misfit("s3://bucket/p", "azure", AzureProvider.storage_schemes) or "")


def test_a_run_with_az_storage_needs_the_machines_identity(arm: RunningArm) -> None:
    request = LaunchRequest(run_id=RUN, name="job", command="true", run_dir="/tmp/x", region="eastus",
                            instance_type="Standard_NC4as_T4_v3", boot_script="#!/bin/bash\n",
                            options={"run_storage_url": run_storage_url(STORAGE, RUN)})
    with pytest.raises(UserError, match="identity"):
        AzureProvider(credential=StaticToken()).check_launch(request)
    AzureProvider(credential=StaticToken(), identity=IDENTITY).check_launch(request)


def test_code_checkpoints_and_outputs_go_through_blob_and_come_back(
        tmp_path: Path, arm: RunningArm, services: RunningVmServices) -> None:
    blobs = services.state.blobs
    folder = run_storage_url(STORAGE, RUN)  # az://acct/runs/team/r-azstore
    launcher = AzureProvider(credential=StaticToken(), identity=IDENTITY)
    [inst] = launcher.launch(LaunchRequest(
        run_id=RUN, name="job", command="true", run_dir=str(tmp_path / "x"), region="eastus",
        instance_type="Standard_NC4as_T4_v3", price_per_hour=Decimal("0.2"), boot_script="#!/bin/bash\n",
        options={"run_storage_url": folder}))
    assert arm.state.groups[GROUP.lower()]["tags"]["gpuplan:storage"] == folder
    # An earlier machine of the run left a checkpoint at step 5.
    blobs[("acct", "runs", f"team/{RUN}/checkpoints/step")] = b"5\n"
    # The launch ships the job's folder with the user's credential (gpuplan.launching.code_upload).
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print('the shipped code')\n")
    upload(bundle(src, tmp_path / "code.tar.gz").path, code_url(STORAGE, RUN))
    assert ("acct", "runs", f"team/{RUN}/code.tar.gz") in blobs
    assert ("PUT", "user") in services.state.blob_callers

    services.state.blob_callers.clear()
    code = _boot(tmp_path, arm, services, storage_url=f"{folder}/node-0", checkpoint_dir="ckpt",
                 checkpoint_url=checkpoint_url(STORAGE, RUN), code_url=code_url(STORAGE, RUN))
    assert code == 0, (tmp_path / "machine" / "boot.log").read_text()
    assert blobs[("acct", "runs", f"team/{RUN}/checkpoints/step")].strip() == b"8"  # pushed back
    assert {who for _, who in services.state.blob_callers} == {"machine"}  # the VM's identity only
    assert len(blobs[("acct", "runs", f"team/{RUN}/node-0/metrics.jsonl")].splitlines()) == 3  # steps 6-8

    # Another process: a fresh provider finds the storage from the group's tag and fetches with the user's token.
    services.state.blob_callers.clear()
    run_dir = tmp_path / "run"
    fetcher = AzureProvider(credential=StaticToken())
    fetcher.fetch_outputs(Instance(provider="azure", instance_id=inst.instance_id, state=InstanceState.TERMINATED,
                                   run_id=RUN, node_rank=0), str(run_dir))
    log = (run_dir / "node-0" / "job.log").read_text()
    assert "resumed at 5" in log and "the shipped code" in log and "restored checkpoints" in log, log
    assert [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()] == [6, 7, 8]
    assert json.loads((run_dir / "node-0" / "exit.json").read_text())["exit_code"] == 0
    assert services.state.blob_callers and {who for _, who in services.state.blob_callers} == {"user"}
    # A second fetch reads nothing that did not change (the ETags it saw).
    reads = sum(1 for m, p in services.state.log if m == "GET" and "comp=list" not in p)
    fetcher.fetch_outputs(Instance(provider="azure", instance_id=inst.instance_id, state=InstanceState.TERMINATED,
                                   run_id=RUN, node_rank=0), str(run_dir))
    assert sum(1 for m, p in services.state.log if m == "GET" and "comp=list" not in p) == reads
    # `gpuplan checkpoints` lists the run's checkpoints in Blob.
    assert [f.name for f in list_files(checkpoint_url(STORAGE, RUN))] == ["step"]


def _boot(tmp_path: Path, arm: RunningArm, services: RunningVmServices, **values: object) -> int:
    from gpuplan.providers.azure.boot import azure_boot_cloud

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for cmd in ("shutdown", "poweroff"):
        (bin_dir / cmd).write_text(f"#!/bin/sh\necho {cmd} >> {tmp_path}/powered-off\n")
        (bin_dir / cmd).chmod(0o755)
    plan = BootPlan(run_id=RUN, name="job", argv=["/bin/bash", "-c", JOB], base_dir=str(tmp_path / "machine"),
                    poweroff=True, runtime="process",
                    cloud=azure_boot_cloud(arm_endpoint=arm.endpoint, metadata_url=services.imds_url,
                                           blob_endpoint=services.storage_url), **values)  # type: ignore[arg-type]
    script = tmp_path / "boot.sh"
    script.write_text(render_boot_script(plan))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CURL_CA_BUNDLE": os.environ["REQUESTS_CA_BUNDLE"],
           "LANG": "C.UTF-8"}
    proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc.wait(timeout=120)
