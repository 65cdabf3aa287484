"""The Azure boot hooks run for real: the rendered boot script under bash, with curl, against a fake IMDS, Key
Vault and Blob storage (tests/support/fake_arm/vm_services.py) and the fake ARM. A secret comes from Key Vault
with the managed identity's token, outputs land in Blob, the exit code is tagged on the run's resource group, and
at its end the VM deletes itself through ARM (an OS shutdown would leave it stopped and still billed); a Spot
`Preempt` scheduled event is the interruption notice."""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.providers.azure.boot import azure_boot_cloud
from gpuplan.providers.azure.provider import AzureProvider
from gpuplan.providers.base import InstanceState, LaunchRequest

from support.fake_arm.fixture import RunningArm, StaticToken
from support.fake_arm.vm_services import RunningVmServices, serve_vm_services
from support.reaper import reap

RUN = "r-boot1"
GROUP = f"gpuplan-{RUN}"
VM = f"gpuplan-{RUN}-0"


@pytest.fixture(autouse=True)
def no_job_outlives_its_test(tmp_path: Path) -> Iterator[None]:
    yield
    reap(tmp_path)


@pytest.fixture
def services(tmp_path: Path, arm: RunningArm) -> Iterator[RunningVmServices]:
    with serve_vm_services(tmp_path / "vm-services") as running:
        running.state.compute.update(subscriptionId=arm.state.subscription, resourceGroupName=GROUP, name=VM)
        yield running


@pytest.fixture
def machine(arm: RunningArm) -> AzureProvider:
    """The run's VM exists in the fake ARM (launched by the provider), as it would when its script runs."""
    p = AzureProvider(credential=StaticToken())
    p.launch(LaunchRequest(run_id=RUN, name="job", command="true", run_dir="/tmp/x", region="eastus",
                           instance_type="Standard_NC4as_T4_v3", spot=True, price_per_hour=Decimal("0.2"),
                           boot_script="#!/bin/bash\n"))
    return p


def run_script(tmp_path: Path, arm: RunningArm, services: RunningVmServices, argv: list[str],
               **extra: object) -> tuple[int, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for cmd in ("shutdown", "poweroff"):  # a machine's power-off, recorded instead of done
        (bin_dir / cmd).write_text(f"#!/bin/sh\necho {cmd} >> {tmp_path}/powered-off\n")
        (bin_dir / cmd).chmod(0o755)
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(arm.ca_bundle.read_bytes() + services.ca_bundle.read_bytes())
    values: dict = dict(run_id=RUN, name="job", argv=argv, base_dir=str(tmp_path / "machine"), poweroff=True,
                        runtime="process", cloud=azure_boot_cloud(arm_endpoint=arm.endpoint,
                                                                  metadata_url=services.imds_url,
                                                                  blob_endpoint=services.storage_url))
    values.update(extra)
    script = tmp_path / "boot.sh"
    script.write_text(render_boot_script(BootPlan(**values)))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CURL_CA_BUNDLE": str(bundle),
           "LANG": "C.UTF-8"}
    proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc.wait(timeout=120), tmp_path / "powered-off"


def test_secret_outputs_exit_code_and_the_vm_deletes_itself(tmp_path: Path, arm: RunningArm,
                                                            services: RunningVmServices,
                                                            machine: AzureProvider) -> None:
    value = "s3cr3t with 'quotes' $(touch PWNED)\nline2\n"  # shell words and newlines reach the job as they are
    services.state.secrets["gpuplan-hf"] = base64.b64encode(value.encode()).decode()
    job = 'printf %s "$HF_TOKEN" > "$GPUPLAN_RUN_DIR/got-secret"; echo done; exit 3'
    code, powered_off = run_script(
        tmp_path, arm, services, ["/bin/bash", "-c", job],
        secret_params={"HF_TOKEN": f"{services.storage_url}/secrets/gpuplan-hf"},
        storage_url=f"az://acct/runs/gpuplan/{RUN}/node-0")
    assert code == 3
    assert not (tmp_path / "PWNED").exists()
    assert [p.read_text() for p in (tmp_path / "machine").rglob("got-secret")] == [value]
    # Outputs in Blob storage, with the VM's storage token.
    shipped = {name: data for (account, container, name), data in services.state.blobs.items()}
    assert b'"exit_code": 3' in shipped[f"gpuplan/{RUN}/node-0/exit.json"]
    assert b"done" in shipped[f"gpuplan/{RUN}/node-0/job.log"]
    # The exit code as a tag on the run's resource group, which outlives the VM.
    assert arm.state.groups[GROUP.lower()]["tags"]["gpuplan:exit-code-0"] == "3"
    # The VM deleted itself through ARM (no power-off: a stopped VM is still billed).
    assert not powered_off.exists()
    arm.state.settle()
    assert arm.state.vms() == []
    assert arm.state.of_type("Microsoft.Compute/disks") == []  # its disk and NIC went with it
    assert arm.state.of_type("Microsoft.Network/networkInterfaces") == []
    [gone] = machine.describe([f"{GROUP}/{VM}"])
    assert (gone.state, gone.exit_code) == (InstanceState.TERMINATED, 3)
    # gpuplan's teardown takes what is left (public IP, network, the group).
    machine.terminate([f"{GROUP}/{VM}"])
    assert arm.state.leftovers() == []


def test_without_an_identity_the_vm_powers_off_and_gpuplan_deletes_the_stopped_vm(
        tmp_path: Path, arm: RunningArm, services: RunningVmServices, machine: AzureProvider) -> None:
    services.state.compute.clear()  # IMDS knows no compute metadata: no way to name the VM to delete
    code, powered_off = run_script(tmp_path, arm, services, ["/bin/true"])
    assert code == 0 and powered_off.exists()
    arm.state.stop_from_guest(GROUP, VM)  # what the power-off leaves: stopped, allocated, billed
    [inst] = machine.describe([f"{GROUP}/{VM}"])
    assert inst.state == InstanceState.TERMINATED and "deleted by gpuplan" in (inst.state_reason or "")
    arm.state.settle()
    assert arm.state.vms() == []


def test_a_preempt_event_is_the_interruption_notice_and_marks_the_eviction(
        tmp_path: Path, arm: RunningArm, services: RunningVmServices, machine: AzureProvider) -> None:
    services.state.preempt(VM)
    # (poweroff off: the script would otherwise wait for the cloud to take the machine)
    code, _ = run_script(tmp_path, arm, services, ["/bin/bash", "-c", "sleep 60"], interruption_watch=True,
                         notice_poll_seconds=1, checkpoint_dir="ckpt", poweroff=False)
    assert code != 0
    [notice] = list((tmp_path / "machine").rglob("interruption.json"))
    assert '"azure"' in notice.read_text()
    assert arm.state.groups[GROUP.lower()]["tags"]["gpuplan:evicted-0"] == "true"
    arm.state.evict(GROUP, VM)  # eviction policy Delete: Azure deletes the VM
    [inst] = machine.describe([f"{GROUP}/{VM}"])
    assert inst.state == InstanceState.PREEMPTED


def test_the_azure_boot_script_passes_shellcheck() -> None:
    import shutil

    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck is not installed (scripts/test-services.sh installs it)")
    script = render_boot_script(BootPlan(run_id=RUN, name="n", argv=["true"], cloud=azure_boot_cloud(),
                                         storage_url="az://acct/runs/p", checkpoint_url="az://acct/runs/ck",
                                         checkpoint_dir="ck", interruption_watch=True,
                                         secret_params={"X": "https://v.vault.azure.net/secrets/x"}))
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
