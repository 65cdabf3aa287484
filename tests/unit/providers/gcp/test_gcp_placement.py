"""Issue 32 item 3 (GCP): a multi-node run on an accelerator-optimized machine (A2/A3/A4/G2) goes into the run's own
compact placement policy, deleted with its last VM; single nodes and n1 hosts get none."""

from __future__ import annotations

from gpuplan.providers.base import LaunchRequest
from gpuplan.providers.gcp.provider import GcpProvider

from support.fakes.gce_server import RunningFake


def req(run_id: str, **kw: object) -> LaunchRequest:
    fields: dict[str, object] = {"run_id": run_id, "name": "cp", "command": "true", "run_dir": "/tmp/cp",
                                 "gpu": "H100", "gpus_per_node": 8, "instance_type": "a3-highgpu-8g", "nodes": 2,
                                 "zones": ("us-west1-a",), "boot_script": "#!/bin/sh\ntrue\n"}
    fields.update(kw)
    return LaunchRequest(**fields)  # type: ignore[arg-type]


def test_a_multi_node_a3_run_is_placed_compactly_and_its_policy_goes_with_it(gce: RunningFake) -> None:
    provider = GcpProvider(retry_initial=0.01, retry_timeout=5)
    nodes = provider.launch(req("r-compact001"))
    [(where, policy)] = gce.state.resource_policies.items()
    assert where == ("us-west1", "gpuplan-r-compact001")
    assert policy["groupPlacementPolicy"] == {"collocation": "COLLOCATED", "vmCount": 2}
    vms = [vm for vm in gce.state.live() if "r-compact001" in vm["name"]]
    assert len(vms) == 2 and all(vm["resourcePolicies"] == [
        f"projects/{gce.state.project}/regions/us-west1/resourcePolicies/gpuplan-r-compact001"] for vm in vms)
    # Another process tears it down (`gpuplan stop`): the labels and the VMs' policies tell it what to delete.
    GcpProvider(retry_initial=0.01, retry_timeout=5).terminate([n.instance_id for n in nodes])
    assert gce.state.resource_policies == {}


def test_single_nodes_and_attached_gpu_hosts_get_no_policy(gce: RunningFake) -> None:
    provider = GcpProvider(retry_initial=0.01, retry_timeout=5)
    provider.launch(req("r-compact002", nodes=1))
    provider.launch(req("r-compact003", gpu="T4", gpus_per_node=1, instance_type="n1-standard-8",
                        zones=("us-central1-a",)))
    assert gce.state.resource_policies == {}


def test_every_gcp_launch_path_needs_only_the_documented_permissions(gce: RunningFake) -> None:
    """Issue 32 item 7 on GCP: single node, multi-node (compact placement, firewall on an own network), teardown,
    with exactly the shipped permission list as the caller's (the strict layer refuses anything else)."""
    import pytest

    from gpuplan.providers.base import AuthError
    from gpuplan.providers.gcp.permissions import launch_roles

    gce.strict.caller_permissions = set(launch_roles()["permissions"])
    provider = GcpProvider(retry_initial=0.01, retry_timeout=5, network="global/networks/train-net")
    single = provider.launch(req("r-perm000001", nodes=1, gpu="T4", gpus_per_node=1, instance_type="n1-standard-8",
                                 zones=("us-central1-a",)))
    multi = provider.launch(req("r-perm000002"))
    provider.terminate([n.instance_id for n in [*single, *multi]])
    assert gce.strict.denied == [] and gce.state.resource_policies == {}
    gce.strict.caller_permissions -= {"compute.firewalls.create"}
    gce.state.firewalls.clear()
    with pytest.raises(AuthError):
        provider.launch(req("r-perm000003"))
    assert gce.strict.denied == ["compute.firewalls.create"]


def test_a_compact_policy_takes_up_to_1500_vms() -> None:
    """A policy without maxDistance holds 1,500 VMs (placement-policies-overview; 150 was the older page's figure):
    a 200-node A3 run is placed compactly, a 1,501-node one goes without, and GCE (the strict fake) takes 1,500."""
    from gpuplan.providers.gcp.placement import MAX_COMPACT_VMS, wants_compact

    from support.strict_gce import MAX_COMPACT_VMS as GCE_LIMIT

    assert MAX_COMPACT_VMS == GCE_LIMIT == 1500
    assert wants_compact("a3-highgpu-8g", 200) and wants_compact("a2-highgpu-8g", 1500)
    assert not wants_compact("a3-highgpu-8g", 1501) and not wants_compact("n1-standard-8", 2)


def test_gce_accepts_a_1500_vm_compact_policy(gce: RunningFake) -> None:
    from google.cloud import compute_v1

    policies = GcpProvider(retry_initial=0.01, retry_timeout=5).client("ResourcePoliciesClient")
    policies.insert(project=gce.state.project, region="us-west1", resource_policy_resource=compute_v1.ResourcePolicy(
        name="wide", region="us-west1", group_placement_policy=compute_v1.ResourcePolicyGroupPlacementPolicy(
            collocation="COLLOCATED", vm_count=1500))).result()
    assert gce.strict.refused == [] and ("us-west1", "wide") in gce.state.resource_policies
