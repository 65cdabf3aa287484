"""Issue 32 item 3 (GCP A3): a multi-node A3 High/Edge run gets 4 extra gVNIC data NICs (GPUDirect-TCPX), A3 Mega 8
(TCPXO), each on its own gpuplan network (MTU 8244, a subnet in the region, a firewall rule), kept and reused; the
strict GCE layer's `nics`, `placement` and `network_mtu` rules refuse what the plain fake accepts, and gpuplan's own
requests pass them with exactly the shipped permission list."""

from __future__ import annotations

from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.cloud import compute_v1

from gpuplan.providers.base import LaunchRequest
from gpuplan.providers.gcp.data_nics import DATA_MTU, DESCRIPTION
from gpuplan.providers.gcp.permissions import launch_roles
from gpuplan.providers.gcp.provider import GcpProvider
from unit.providers.gcp.test_strict_gce import ZONE, body, client, insert

from support.fakes.gce_server import RunningFake
from support.strict_gce import reachable


def req(run_id: str, **kw: object) -> LaunchRequest:
    fields: dict[str, object] = {"run_id": run_id, "name": "nics", "command": "true", "run_dir": "/tmp/nics",
                                 "gpu": "H100", "gpus_per_node": 8, "instance_type": "a3-highgpu-8g", "nodes": 2,
                                 "zones": ("us-west1-a",), "boot_script": "#!/bin/sh\ntrue\n"}
    fields.update(kw)
    return LaunchRequest(**fields)  # type: ignore[arg-type]


def last(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def test_a_multi_node_a3_high_run_gets_four_data_nics_on_reused_networks(gce: RunningFake) -> None:
    gce.strict.caller_permissions = set(launch_roles()["permissions"])
    provider = GcpProvider(retry_initial=0.01, retry_timeout=5)
    nodes = provider.launch(req("r-tcpx000001"))
    vms = [vm for vm in gce.state.live() if "r-tcpx000001" in vm["name"]]
    assert len(vms) == 2
    for vm in vms:
        nics = vm["networkInterfaces"]
        assert len(nics) == 5 and all(n["nicType"] == "GVNIC" for n in nics)
        assert [last(n["network"]) for n in nics] == ["default", *(f"gpuplan-gpu-data-{i}" for i in range(1, 5))]
        assert [last(n["subnetwork"]) for n in nics[1:]] == [f"gpuplan-gpu-data-{i}-us-west1" for i in range(1, 5)]
        assert not any(n.get("accessConfigs") for n in nics[1:])  # data NICs have no external address
    assert {n: (v["mtu"], v["autoCreateSubnetworks"], v["description"]) for n, v in gce.state.networks.items()} == {
        f"gpuplan-gpu-data-{i}": (DATA_MTU, False, DESCRIPTION) for i in range(1, 5)}
    # The ranks reach each other on each data network (its own firewall rule), as on `default`.
    for i in range(1, 5):
        a, b = ({**vm, "networkInterfaces": [vm["networkInterfaces"][i]]} for vm in vms)
        assert reachable(gce.state, a, b)
    assert gce.strict.refused == [] and gce.strict.denied == []
    # Kept and reused: a second run makes nothing new; the networks outlive the runs' VMs (they cost nothing).
    made = len([c for c in gce.state.calls if c[0] == "POST" and c[1].endswith(("/networks", "/subnetworks"))])
    provider.terminate([n.instance_id for n in nodes])
    more = provider.launch(req("r-tcpx000002"))
    assert len([c for c in gce.state.calls if c[0] == "POST" and c[1].endswith(("/networks", "/subnetworks"))]) \
        == made == 8
    provider.terminate([n.instance_id for n in more])
    assert len(gce.state.networks) == 4 and len(gce.state.subnetworks) == 4


def test_a3_mega_gets_eight_and_single_nodes_and_other_types_none(gce: RunningFake) -> None:
    provider = GcpProvider(retry_initial=0.01, retry_timeout=5)
    provider.launch(req("r-tcpxo00001", gpu="H100-MEGA", instance_type="a3-megagpu-8g"))
    provider.launch(req("r-single0001", nodes=1))
    provider.launch(req("r-a2nodes001", gpu="A100", instance_type="a2-highgpu-8g", zones=("us-central1-c",)))
    counts = {vm["name"].split("-")[2]: len(vm["networkInterfaces"]) for vm in gce.state.live()}
    assert counts == {"tcpxo00001": 9, "single0001": 1, "a2nodes001": 1}
    single = next(vm for vm in gce.state.live() if "single0001" in vm["name"])
    assert single["networkInterfaces"][0]["nicType"] == "GVNIC"  # every A3 interface is gVNIC
    assert gce.strict.refused == []


def test_without_permission_to_make_the_networks_the_launch_stops_before_any_vm(gce: RunningFake) -> None:
    from gpuplan.providers.base import AuthError

    gce.strict.caller_permissions = set(launch_roles()["permissions"]) - {"compute.networks.create"}
    with pytest.raises(AuthError, match=r"roles/compute\.networkAdmin"):
        GcpProvider(retry_initial=0.01, retry_timeout=5).launch(req("r-tcpx000003"))
    assert gce.state.live() == [] and gce.strict.denied == ["compute.networks.create"]


def a3_nics(*networks: str, nic_type: str | None = "GVNIC") -> list[compute_v1.NetworkInterface]:
    return [compute_v1.NetworkInterface(network=f"global/networks/{n}", nic_type=nic_type) for n in networks]


def refused_insert(gce: RunningFake, rule: str, instance: compute_v1.Instance, **rule_values: Any) -> str:
    """The plain fake (the rule off) takes `instance`; with the rule on, GCE's 400/404 and no VM."""
    setattr(gce.strict, rule, False)
    assert not insert(gce, instance).error
    setattr(gce.strict, rule, True)
    instance.name = instance.name + "-again"
    with pytest.raises(gexc.GoogleAPICallError) as caught:
        insert(gce, instance)
    assert gce.strict.refused == [rule] and len(gce.state.live()) == 1
    return str(caught.value)


def test_nics_rule_two_interfaces_on_one_network(gce: RunningFake) -> None:
    vm = body()
    vm.network_interfaces = a3_nics("default", "default")
    assert "Networks must be distinct for NICs attached to a VM." in refused_insert(gce, "nics", vm)


def test_nics_rule_an_a3_interface_without_gvnic(gce: RunningFake) -> None:
    vm = body()
    vm.network_interfaces = a3_nics("default", nic_type="VIRTIO_NET")
    assert "requires GVNIC" in refused_insert(gce, "nics", vm)


def test_nics_rule_more_interfaces_than_the_machine_has(gce: RunningFake) -> None:
    vm = body()
    vm.network_interfaces = a3_nics("default", *(f"data-{i}" for i in range(5)))  # 1 + 5 on a 1 + 4 machine
    assert "at most 5" in refused_insert(gce, "nics", vm)


def test_placement_rule_a_compact_policy_on_n1(gce: RunningFake) -> None:
    policies = client(gce, "ResourcePoliciesClient")
    policy = compute_v1.ResourcePolicy(name="tight", region="us-central1", group_placement_policy=compute_v1
                                       .ResourcePolicyGroupPlacementPolicy(collocation="COLLOCATED", vm_count=2))
    policies.insert(project=gce.state.project, region="us-central1", resource_policy_resource=policy)
    vm = body("n1-standard-8")
    vm.guest_accelerators = [compute_v1.AcceleratorConfig(accelerator_type=f"zones/{ZONE}/acceleratorTypes/"
                                                          "nvidia-tesla-t4", accelerator_count=1)]
    vm.resource_policies = ["projects/gpuplan-test/regions/us-central1/resourcePolicies/tight"]
    assert "cannot be applied to machine type n1-standard-8" in refused_insert(gce, "placement", vm)


@pytest.mark.parametrize(("rule", "call"), [
    ("placement", lambda c, p: c(compute_v1.ResourcePolicy(
        name="huge", region="us-central1", group_placement_policy=compute_v1.ResourcePolicyGroupPlacementPolicy(
            collocation="COLLOCATED", vm_count=1501)))),
    ("network_mtu", lambda c, p: c(compute_v1.Network(name="jumbo", auto_create_subnetworks=False, mtu=9000))),
])
def test_policy_and_network_limits(gce: RunningFake, rule: str, call: Any) -> None:
    project = gce.state.project

    def make(resource: Any) -> Any:
        if isinstance(resource, compute_v1.Network):
            return client(gce, "NetworksClient").insert(project=project, network_resource=resource)
        return client(gce, "ResourcePoliciesClient").insert(project=project, region="us-central1",
                                                            resource_policy_resource=resource)

    setattr(gce.strict, rule, False)
    call(make, project)  # the plain fake takes it
    setattr(gce.strict, rule, True)
    gce.state.networks.clear()
    gce.state.resource_policies.clear()
    with pytest.raises(gexc.BadRequest):
        call(make, project)
    assert gce.strict.refused == [rule]
