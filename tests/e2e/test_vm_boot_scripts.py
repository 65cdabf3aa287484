"""The real AWS user data and GCP startup script, run in podman containers standing in for VMs (support.vm_containers).

- AWS, two nodes: each "VM" learns its rank and the master's address from its instance tags (IMDSv2 on its own
  loopback), and a bare `torchrun train.py` on each reaches the other through the exported PET_* variables: gloo
  all-reduces across the two containers' addresses (issue 31, items 1 and 2: before the fix both nodes were rank 0 of
  a rendezvous on 127.0.0.1 and the run hung). The VMs power off at the end (EC2 terminates them on shutdown).
- GCP, one node: the startup script gpuplan put in the VM's metadata (through the real Compute client against the
  fake API) runs; at its end the VM deletes itself through instances.delete with its metadata-server token instead
  of powering off (item 5: before the fix it powered off, and a stopped VM bills its disk).
- GCP and Azure, two nodes: each VM's SKYPILOT_NODE_IPS lists both nodes, rank 0 first (GCP: internal DNS names
  resolved on the VM; Azure: the NICs' private addresses, launched through the real SDK against the fake ARM).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import socket
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.jobs.foreign.skypilot import prelude
from gpuplan.launching.placements import with_boot_scripts
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.aws.ranks import TAG_MASTER_ADDR, node_ips_tags
from gpuplan.providers.aws.rules import TAG_NODE_RANK
from gpuplan.providers.azure.provider import AzureProvider
from gpuplan.providers.base import LaunchRequest
from gpuplan.providers.gcp.provider import GcpProvider

from support.fake_arm.fixture import RunningArm, StaticToken
from support.fakes.gce_server import RunningFake
from support.vm_containers import VmLab

TRAIN = r"""
import json, os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # torchrun's env:// rendezvous: MASTER_ADDR/PORT, RANK, WORLD_SIZE
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
record = {"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": value.item(),
          "master": os.environ["MASTER_ADDR"], "group_rank": int(os.environ["GROUP_RANK"]),
          "node_ips": os.environ.get("GPUPLAN_NODE_IPS", "")}
with open(os.path.join(os.environ["GPUPLAN_RUN_DIR"], "allreduce.json"), "w") as fh:
    json.dump(record, fh)
dist.destroy_process_group()
"""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[VmLab]:
    vms = VmLab(tmp_path / "lab")
    try:
        yield vms
    finally:
        vms.close()


def test_two_aws_vms_run_a_bare_torchrun_across_their_network(lab: VmLab) -> None:
    lab.create_network()
    code = lab.folder / "shared" / "code"
    code.mkdir(parents=True)
    (code / "train.py").write_text(TRAIN)
    request = LaunchRequest(run_id="r-vm2node0", name="two-vms", command="torchrun /shared/code/train.py",
                            run_dir="/tmp/unused", nodes=2, instance_type="c5.xlarge", region="us-east-1",
                            options={"argv": ["/bin/sh", "-c", "torchrun /shared/code/train.py"],
                                     "run_storage_url": "/shared/runs/r-vm2node0"})
    script = with_boot_scripts(request, AwsProvider(region="us-east-1")).boot_script
    assert script is not None and "IMDS_URL=http://169.254.169.254" in script  # the user data EC2 would get
    script = script.replace("IMDS_URL=http://169.254.169.254", "IMDS_URL=http://127.0.0.1:8169")
    master = f"{lab.subnet}.10"
    # The tags gpuplan puts on the machines (tests/unit/providers/aws/test_aws_machines.py: from RunInstances).
    ips = node_ips_tags([master, f"{lab.subnet}.11"])
    vms = [lab.start(f"node{rank}", script, {"tags": {TAG_NODE_RANK: str(rank), TAG_MASTER_ADDR: master, **ips}},
                     host=10 + rank) for rank in (0, 1)]
    codes = [lab.wait(vm, timeout=180) for vm in vms]
    logs = "\n".join(vm.text("job.log") for vm in vms)
    assert codes == [0, 0], logs
    results = [json.loads(vm.text("allreduce.json")) for vm in vms]
    assert [r["group_rank"] for r in results] == [0, 1]  # each node is its own rank, from its tags, via PET_*
    assert all(r["world"] == 2 and r["sum"] == 3.0 and r["master"] == master for r in results)
    # Every node sees every node's address, rank order (SKYPILOT_NODE_IPS; before: the head node's only).
    assert all(r["node_ips"].split() == [master, f"{lab.subnet}.11"] for r in results)
    for rank, vm in enumerate(vms):
        shipped = lab.folder / "shared" / "runs" / "r-vm2node0" / f"node-{rank}" / "exit.json"
        assert json.loads(shipped.read_text())["exit_code"] == 0
        assert (vm.folder / "powered-off").exists()  # EC2: a shutdown terminates the instance


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_gcp_vm_deletes_itself_instead_of_powering_off(lab: VmLab, gce: RunningFake) -> None:
    provider = GcpProvider(retry_initial=0.01, retry_timeout=5)
    request = LaunchRequest(run_id="r-vmselfdel", name="self-delete", command="echo trained", run_dir="/tmp/unused",
                            project="research", instance_type="n1-standard-8", gpu="T4", gpus_per_node=1,
                            zones=("us-central1-a",), price_per_hour=Decimal("0.73"), max_hours=1.0)
    request = dataclasses.replace(with_boot_scripts(request, provider), gpus_per_node=1)
    [instance] = provider.launch(request)
    [body] = gce.state.live()
    items = {i["key"]: i["value"] for i in body["metadata"]["items"]}
    script = items["startup-script"]
    port = _free_port()
    script = script.replace("METADATA_URL=http://metadata.google.internal/computeMetadata/v1",
                            f"METADATA_URL=http://127.0.0.1:{port}/computeMetadata/v1")
    script = script.replace("EXPECTED_GPUS=1", "EXPECTED_GPUS=0")  # the stand-in VM has no GPU
    vm = lab.start("gcpvm", script, {"project": "gpuplan-test", "zone": instance.zone, "name": body["name"],
                                     "token": "ya29.vm-token"}, metadata_port=port)
    assert lab.wait(vm, timeout=120) == 0, vm.text("job.log")
    log = vm.text("job.log")
    assert "the machine booted 1 s ago" in log, log  # the stand-in's own uptime, not the host's
    assert "deleting this VM through the Compute API" in log, log
    [delete] = gce.state.operations_of("delete")  # the VM's own instances.delete (old code: none, powered off)
    gce.state.get_operation(instance.zone, delete, wait=True)  # GCE carries it out
    assert gce.state.live() == []  # no VM, no disk left billing
    assert not (vm.folder / "powered-off").exists()
    assert ("DELETE", f"/compute/v1/projects/gpuplan-test/zones/{instance.zone}/instances/{body['name']}") in [
        (m, p) for m, p, _args in gce.state.calls]


def test_two_gcp_vms_each_list_both_nodes_addresses(lab: VmLab, gce: RunningFake) -> None:
    """Issue 35: a SkyPilot task's `run` on a two-node GCP run reads SKYPILOT_NODE_IPS; each VM lists both nodes,
    rank 0 first, from the VMs' internal DNS names resolved on the VM (before: the head node's name only)."""
    lab.create_network()
    provider = GcpProvider(retry_initial=0.01, retry_timeout=5)
    run = prelude(False) + '\nprintf "%s\\n" "$SKYPILOT_NODE_IPS" > "$GPUPLAN_RUN_DIR/ips.txt"'
    request = LaunchRequest(run_id="r-vmgcp2nd", name="two-gcp", command=run, run_dir="/tmp/unused", nodes=2,
                            project="research", instance_type="n1-standard-8", gpu="T4", gpus_per_node=1,
                            zones=("us-central1-a",), price_per_hour=Decimal("0.73"),
                            options={"argv": ["/bin/bash", "-c", run]})
    request = dataclasses.replace(with_boot_scripts(request, provider), gpus_per_node=1)
    instances = provider.launch(request)
    bodies = sorted(gce.state.live(), key=lambda b: int(b["labels"]["gpuplan-node-rank"]))
    assert len(bodies) == 2 == len(instances)
    zone = instances[0].zone
    names = [f"{b['name']}.{zone}.c.gpuplan-test.internal" for b in bodies]
    addresses = [f"{lab.subnet}.{20 + rank}" for rank in (0, 1)]
    hosts = tuple(arg for name, ip in zip(names, addresses, strict=True) for arg in ("--add-host", f"{name}:{ip}"))
    vms = []
    for rank, body in enumerate(bodies):
        script = {i["key"]: i["value"] for i in body["metadata"]["items"]}["startup-script"]
        script = script.replace("METADATA_URL=http://metadata.google.internal/computeMetadata/v1",
                                "METADATA_URL=http://127.0.0.1:8169/computeMetadata/v1")
        script = script.replace("EXPECTED_GPUS=1", "EXPECTED_GPUS=0")  # the stand-in VM has no GPU
        vms.append(lab.start(f"gcpnode{rank}", script, {"project": "gpuplan-test", "zone": zone,
                                                        "name": body["name"]}, host=20 + rank, extra=hosts))
    for vm in vms:
        assert lab.wait(vm, timeout=120) == 0, vm.text("job.log")
        assert vm.text("ips.txt").split() == addresses, vm.text("job.log")


def test_two_azure_vms_each_list_both_nodes_addresses(lab: VmLab, arm: RunningArm) -> None:
    """A SkyPilot task's `run` on a two-node Azure run reads SKYPILOT_NODE_IPS: each VM lists both nodes' private
    addresses, rank 0 first, as the NICs got them from the run's VNet (before: rank 0's address only, on both).
    The stand-in VMs sit on those very addresses, so rank 1's MASTER_ADDR is rank 0's machine."""
    lab.create_network(prefix="10.64.0")  # gpuplan's VNet subnet (providers/azure/naming.py): 10.64.0.4 onwards
    provider = AzureProvider(credential=StaticToken(), ssh_public_key=None)  # type: ignore[arg-type]
    run = prelude(False) + ('\nprintf "%s\\n" "$SKYPILOT_NODE_IPS" > "$GPUPLAN_RUN_DIR/ips.txt"'
                            '\nprintf "%s\\n" "$MASTER_ADDR" > "$GPUPLAN_RUN_DIR/master.txt"')
    request = LaunchRequest(run_id="r-vmaz2node", name="two-azure", command=run, run_dir="/tmp/unused", nodes=2,
                            instance_type="Standard_NC24ads_A100_v4", region="eastus", gpus_per_node=1,
                            price_per_hour=Decimal("3.67"), options={"argv": ["/bin/bash", "-c", run]})
    instances = provider.launch(with_boot_scripts(request, provider))
    assert [i.node_rank for i in instances] == [0, 1]
    nics = {n["name"]: n["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
            for n in arm.state.of_type("Microsoft.Network/networkInterfaces")}
    addresses = [nics[f"gpuplan-r-vmaz2node-{rank}-nic"] for rank in (0, 1)]
    assert addresses == [f"{lab.subnet}.4", f"{lab.subnet}.5"]  # Azure's first free addresses of the subnet
    vms = []
    for rank in (0, 1):
        vm = arm.state.resources[arm.state.rid("gpuplan-r-vmaz2node", "Microsoft.Compute/virtualMachines",
                                               f"gpuplan-r-vmaz2node-{rank}").lower()]
        script = base64.b64decode(vm["properties"]["osProfile"]["customData"]).decode()  # what cloud-init runs
        script = script.replace("METADATA_URL=http://169.254.169.254/metadata", "METADATA_URL=http://127.0.0.1:8169/metadata")
        script = script.replace("EXPECTED_GPUS=1", "EXPECTED_GPUS=0")  # the stand-in VM has no GPU
        vms.append(lab.start(f"aznode{rank}", script, {}, host=4 + rank))
    for vm in vms:
        assert lab.wait(vm, timeout=120) == 0, vm.text("job.log")
        assert vm.text("ips.txt").split() == addresses, vm.text("job.log")
        assert vm.text("master.txt").split() == addresses[:1], vm.text("job.log")
