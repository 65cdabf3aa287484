"""A GCP run that finishes on its own reports its exit code through guest attributes (no bucket, no IAM).

The real google-cloud-compute client against the fake Compute API: the test does what the boot script does on
the VM (PUT guest-attributes/gpuplan/exit_code, then power off: status TERMINATED). gpuplan must read the
attributes BEFORE it deletes the stopped VM, and `gpuplan status` must say succeeded/failed with the code.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.launching.placements import with_boot_scripts
from gpuplan.providers.base import InstanceState, LaunchRequest
from gpuplan.providers.gcp.provider import GcpProvider
from gpuplan.providers.gcp.rules import instance_name

from support.clihelp import run_subprocess
from support.fakes.gce_server import RunningFake

ZONE = "us-central1-a"
JOB = """\
name: tiny-gpt-gcp
image: us-docker.pkg.dev/example/tiny-gpt:latest
command: python train.py --steps 200
resources:
  gpu: L4
  gpus_per_node: 1
  regions: [us-central1]
limits:
  max_hours: 2
"""


def job_ends(gce: RunningFake, name: str, exit_code: int, reason: str = "") -> None:
    """What the boot script's record_exit + poweroff do on the VM."""
    for key, value in (("reason", reason), ("exit_code", str(exit_code)),
                       ("status", "succeeded" if exit_code == 0 and not reason else "failed")):
        gce.state.set_guest_attribute(ZONE, name, f"gpuplan/{key}", value)
    gce.state.set_status(ZONE, name, "TERMINATED")


def test_guest_attributes_are_read_before_the_stopped_vm_is_deleted(gce: RunningFake, tmp_path: Path) -> None:
    provider = GcpProvider(retry_initial=0.01, retry_timeout=5)
    request = with_boot_scripts(LaunchRequest(
        run_id="r-guest00001", name="tiny", command="python train.py", run_dir=str(tmp_path), gpu="T4",
        instance_type="n1-standard-8", gpus_per_node=1, zones=(ZONE,), price_per_hour=Decimal("0.5")), provider)
    [inst] = provider.launch(request)
    [vm] = gce.state.live()
    metadata = {i["key"]: i["value"] for i in vm["metadata"]["items"]}
    assert metadata["enable-guest-attributes"] == "TRUE"
    script = metadata["startup-script"]
    assert "report_status() {" in script  # the exit code goes to the guest attributes (GCP's boot hook)
    assert "METADATA_URL=http://metadata.google.internal/computeMetadata/v1" in script
    assert '"$METADATA_URL/instance/guest-attributes/gpuplan/$1"' in script
    assert provider.guest_attributes(ZONE, vm["name"]) == {}  # nothing written yet: not an error

    job_ends(gce, vm["name"], 7)
    [seen] = provider.describe([inst.instance_id])
    assert (seen.state, seen.exit_code) == (InstanceState.TERMINATED, 7)
    gce.state.get_operation(ZONE, gce.state.operations_of("delete")[-1], wait=True)
    assert gce.state.live() == []  # deleted after reading: no disk left billing
    provider.fetch_outputs(seen, str(tmp_path))
    record = json.loads((tmp_path / "node-0" / "exit.json").read_text())
    assert record["exit_code"] == 7


# One CLI case (a subprocess importing google.cloud costs seconds); the failed case is covered in-process above
# and, for the run state, by the AWS tests which share watch's code.
@pytest.mark.parametrize(("exit_code", "state"), [(0, "succeeded")])
def test_status_of_a_finished_vm_is_its_exit_code(gce: RunningFake, tmp_path: Path, exit_code: int,
                                                  state: str) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    launched = run_subprocess("launch", str(job), "--provider", "gcp", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    job_ends(gce, instance_name(run_id, 0), exit_code)
    final = run_subprocess("status", run_id, "--json")
    assert final.exit_code == 0, final.stderr
    out = final.json()
    assert (out["state"], out["exit_code"]) == (state, exit_code), out
    assert out["instances"][0]["terminated_at"] is not None
