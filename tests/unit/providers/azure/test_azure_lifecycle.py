"""The azure provider's lifecycle through the real Azure SDK clients (azure-mgmt-resource/-network/-compute)
against the fake ARM behind its strict layer (tests/support/fake_arm): launch makes a tagged resource group with
its network and VMs, describe/list_tagged read them back, terminate leaves nothing, and failures are typed."""

from __future__ import annotations

import base64
import re
import sys
from collections.abc import Sequence
from decimal import Decimal

import pytest

from gpuplan.providers.azure.provider import AzureProvider
from gpuplan.providers.base import CapacityError, InstanceState, LaunchRequest, QuotaError, Scope

from support.fake_arm.fixture import RunningArm, StaticToken

SIZE = "Standard_NC24ads_A100_v4"


def provider(**kw: object) -> AzureProvider:
    return AzureProvider(credential=StaticToken(), ssh_public_key=None, **kw)  # type: ignore[arg-type]


def request(run_id: str = "r-az1", **kw: object) -> LaunchRequest:
    values: dict = dict(run_id=run_id, name="tiny", command="python train.py", run_dir="/tmp/r",
                        project="research", instance_type=SIZE, region="eastus", spot=True, gpus_per_node=1,
                        price_per_hour=Decimal("1.10"), boot_script="#!/bin/bash\necho hello\n",
                        labels={"team": "nlp"})
    values.update(kw)
    return LaunchRequest(**values)


def test_launch_makes_a_tagged_group_network_and_spot_vm_then_terminate_leaves_nothing(
        arm: RunningArm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPLAN_AZURE_SSH_PUBLIC_KEY")  # no key anywhere (~/.ssh has none here): a throwaway one
    monkeypatch.setenv("HOME", str(arm.ca_bundle.parent))
    p = provider()
    [inst] = p.launch(request())
    assert inst.instance_id == "gpuplan-r-az1/gpuplan-r-az1-0"
    assert (inst.state, inst.region, inst.instance_type, inst.spot) == (InstanceState.RUNNING, "eastus", SIZE, True)
    assert inst.price_per_hour == Decimal("1.10")

    [group] = arm.state.groups.values()
    assert group["tags"]["gpuplan:run-id"] == "r-az1" and group["tags"]["gpuplan:created-by"] == "gpuplan"
    [vm] = arm.state.vms()
    props = vm["properties"]
    assert (props["priority"], props["evictionPolicy"], props["billingProfile"]["maxPrice"]) == ("Spot", "Delete", -1)
    assert base64.b64decode(props["osProfile"]["customData"]).decode().startswith("#!/bin/bash")
    [key] = props["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"]
    assert key["keyData"].startswith("ssh-rsa ") and key["keyData"].endswith(" gpuplan-no-login")
    assert props["storageProfile"]["imageReference"] == {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc",
                                                         "sku": "2204", "version": "latest"}
    # Tags on everything the run made.
    for resource in arm.state.resources.values():
        if resource["type"] != "Microsoft.Compute/disks":  # the OS disk is Azure's, deleted with the VM
            assert resource["tags"]["gpuplan:run-id"] == "r-az1", resource["id"]
            assert resource["tags"]["team"] == "nlp"
    # No inbound rule unless ssh is asked for: the default rules (VNet inside, deny the rest) only.
    [nsg] = arm.state.of_type("Microsoft.Network/networkSecurityGroups")
    assert nsg["properties"]["securityRules"] == []

    assert [i.instance_id for i in p.list_tagged("r-az1")] == [inst.instance_id]
    assert p.list_tagged("someone-else") == []
    [again] = p.describe([inst.instance_id])
    assert again.state == InstanceState.RUNNING and again.run_id == "r-az1"

    p.terminate([inst.instance_id])
    assert arm.state.leftovers() == []
    [gone] = p.describe([inst.instance_id])
    assert gone.state == InstanceState.TERMINATED
    p.terminate([inst.instance_id])  # idempotent


def test_a_second_launch_of_the_same_run_returns_its_vm(arm: RunningArm) -> None:
    p = provider()
    first = p.launch(request())
    second = p.launch(request())
    assert [i.instance_id for i in second] == [i.instance_id for i in first]
    assert len(arm.state.vms()) == 1


def test_ssh_is_opened_to_one_address_only_when_asked(arm: RunningArm) -> None:
    provider(ssh_from="198.51.100.7").launch(request(spot=False))
    [nsg] = arm.state.of_type("Microsoft.Network/networkSecurityGroups")
    [rule] = nsg["properties"]["securityRules"]
    assert (rule["properties"]["sourceAddressPrefix"], rule["properties"]["destinationPortRange"]) == \
        ("198.51.100.7/32", "22")
    [vm] = arm.state.vms()
    assert vm["properties"]["priority"] == "Regular" and "evictionPolicy" not in vm["properties"]


@pytest.mark.parametrize(("code", "sync", "scope"), [
    ("SkuNotAvailable", True, Scope(region="eastus", instance_type=SIZE)),
    ("AllocationFailed", False, Scope(region="eastus", instance_type=SIZE)),
])
def test_capacity_errors_are_typed_and_leave_nothing(arm: RunningArm, code: str, sync: bool, scope: Scope) -> None:
    arm.state.fail_vm_create(code, sync=sync)
    with pytest.raises(CapacityError) as err:
        provider().launch(request())
    assert err.value.code == code and err.value.scope == scope
    assert arm.state.leftovers() == []


def test_a_zonal_allocation_failure_rules_out_the_zone(arm: RunningArm) -> None:
    arm.state.fail_vm_create("ZonalAllocationFailed", zone="2")
    with pytest.raises(CapacityError) as err:
        provider().launch(request(zones=("eastus-2",)))
    assert err.value.scope == Scope(region="eastus", zone="eastus-2", instance_type=SIZE)
    assert arm.state.leftovers() == []


def test_quota_errors_name_their_scope(arm: RunningArm) -> None:
    family = "standardNCADSA100v4Family"
    arm.rules.family_of[SIZE] = family
    arm.rules.quotas[("eastus", family)] = 0
    with pytest.raises(QuotaError) as err:
        provider().launch(request(spot=False))
    assert err.value.code == "OperationNotAllowed"
    assert err.value.scope == Scope(region="eastus", family=family, spot=False)
    arm.rules.quotas[("eastus", "LowPriorityCores")] = 8
    with pytest.raises(QuotaError) as err:
        provider().launch(request(spot=True))
    assert err.value.scope == Scope(region="eastus", spot=True)
    assert arm.state.leftovers() == []


def test_secrets_go_to_key_vault_never_into_the_custom_data_and_leave_with_the_run(arm: RunningArm) -> None:
    from gpuplan.launching.placements import with_boot_scripts

    p = provider(key_vault=arm.endpoint)
    value = "hf_very_secret_value"
    req = with_boot_scripts(request(secrets={"HF_TOKEN": value}, boot_script=None), p)
    [inst] = p.launch(req)
    [vm] = arm.state.vms()
    script = base64.b64decode(vm["properties"]["osProfile"]["customData"]).decode()
    assert value not in script and base64.b64encode(value.encode()).decode() not in script
    [(name, stored)] = arm.state.secrets.items()
    assert f"{arm.endpoint}/secrets/{name}" in script  # the script names the secret only
    assert base64.b64decode(stored["value"]).decode() == value and stored["tags"]["gpuplan:run-id"] == "r-az1"
    p.terminate([inst.instance_id])
    assert arm.state.secrets == {} and arm.state.deleted_secrets == set()  # deleted and purged
    assert arm.state.leftovers() == []


def test_a_run_with_secrets_needs_a_key_vault(arm: RunningArm) -> None:
    from gpuplan.errors import UserError

    with pytest.raises(UserError, match="key_vault"):
        provider().check_launch(request(secrets={"HF_TOKEN": ""}))


@pytest.mark.parametrize("missing", ["azure.mgmt.compute", "azure.identity"])
def test_without_the_azure_extra_a_launch_is_refused_before_anything_is_recorded(
        missing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the SDK a launch used to record its run and fail mid-start ("Azure request failed: UserError",
    exit 1); check_launch now says what to install, before anything is recorded."""
    from gpuplan.errors import UserError

    monkeypatch.setitem(sys.modules, missing, None)  # what importlib finds when the package is absent
    with pytest.raises(UserError, match=re.escape("pip install 'gpuplan[azure]'")):
        provider().check_launch(request())


def _nic_ips(arm: RunningArm) -> dict[str, str]:
    return {n["name"]: n["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
            for n in arm.state.of_type("Microsoft.Network/networkInterfaces")}


def _custom_data(arm: RunningArm, group: str, name: str) -> str:
    vm = arm.state.resources[arm.state.rid(group, "Microsoft.Compute/virtualMachines", name).lower()]
    return base64.b64decode(vm["properties"]["osProfile"]["customData"]).decode()


def test_two_nodes_share_the_network_and_every_rank_gets_every_nodes_private_address(arm: RunningArm) -> None:
    rendered: list[tuple[int, str | None, list[str]]] = []

    def script_for(rank: int, master: str | None, node_addrs: Sequence[str] = ()) -> str:
        rendered.append((rank, master, list(node_addrs)))
        return f"#!/bin/bash\necho rank {rank}\n"

    nodes = provider().launch(request(nodes=2, options={"boot_script_for": script_for}))
    assert [i.node_rank for i in nodes] == [0, 1]
    ips = _nic_ips(arm)
    both = [ips["gpuplan-r-az1-0-nic"], ips["gpuplan-r-az1-1-nic"]]
    assert both == ["10.64.0.4", "10.64.0.5"]  # the subnet's first free addresses (strict layer: private_ips)
    assert rendered == [(0, both[0], both), (1, both[0], both)]
    nics = {n["name"]: n for n in arm.state.of_type("Microsoft.Network/networkInterfaces")}
    subnets = {n["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"] for n in nics.values()}
    assert len(subnets) == 1  # one subnet: the NSG's default AllowVnetInBound lets the ranks reach each other
    assert len(arm.state.of_type("Microsoft.Network/virtualNetworks")) == 1


def test_ssh_goes_to_the_public_ip_only_when_port_22_was_opened(arm: RunningArm) -> None:
    from gpuplan.providers.attach_base import AttachTarget
    from gpuplan.providers.base import ProviderError

    [inst] = provider(ssh_from="198.51.100.7").launch(request())
    target = AttachTarget(run_id="r-az1", provider="azure", instance_id=inst.instance_id, node_rank=0, nodes=1,
                          region="eastus")
    [ip] = arm.state.of_type("Microsoft.Network/publicIPAddresses")
    attach = provider().attach(target, ["nvidia-smi"], interactive=False)
    assert attach.argv[:3] == ["ssh", "-o", "StrictHostKeyChecking=accept-new"]
    assert attach.argv[3] == f"gpuplan@{ip['properties']['ipAddress']}" and "nvidia-smi" in attach.argv[-1]

    [other] = provider().launch(request(run_id="r-az2"))  # no ssh_from: DenyAllInBound refuses port 22
    closed = AttachTarget(run_id="r-az2", provider="azure", instance_id=other.instance_id, node_rank=0, nodes=1,
                          region="eastus")
    with pytest.raises(ProviderError, match="ssh_from"):
        provider().attach(closed, None, interactive=True)


def test_custom_data_over_azures_limit_is_refused_before_anything_and_by_azure(arm: RunningArm) -> None:
    from gpuplan.errors import UserError
    from gpuplan.providers.base import ProviderError

    big = "#!/bin/bash\n" + "#" * 70000 + "\n"
    with pytest.raises(UserError, match="65535"):
        provider().check_launch(request(boot_script=big))
    assert arm.state.requests == []
    # Past the check, Azure itself refuses it (InvalidParameter on customData), and the launch leaves nothing.
    with pytest.raises(ProviderError) as err:
        provider().launch(request(boot_script=big))
    assert err.value.code == "InvalidParameter" and "87380" in str(err.value)
    assert arm.state.leftovers() == []
    arm.rules.custom_data = False  # the plain fake alone would have taken it
    provider().launch(request(boot_script=big))
    assert len(arm.state.vms()) == 1


def test_spec_labels_azure_would_refuse_are_left_out_not_fatal(arm: RunningArm) -> None:
    provider().launch(request(labels={"team": "nlp", "cost/center": "42"}))
    [vm] = arm.state.vms()
    assert vm["tags"]["team"] == "nlp" and "cost/center" not in vm["tags"]
    from support.fake_arm.model import ArmError
    from support.fake_arm.strict import check_tags

    with pytest.raises(ArmError, match="InvalidTagNameCharacters"):
        check_tags(arm.rules, {"tags": {"cost/center": "42"}})


def test_a_relaunch_waits_for_the_previous_group_to_finish_deleting(arm: RunningArm) -> None:
    import threading

    p = provider()
    [inst] = p.launch(request())
    arm.state.delete_vm(next(iter(arm.state.vms())))  # the VM deleted itself
    arm.state.polls = 10**9  # the group's delete stays in progress until Azure settles it below
    p.describe([inst.instance_id])  # ...so gpuplan deletes the run's group, without waiting
    arm.state.polls = 1
    assert arm.state.groups["gpuplan-r-az1"]["properties"]["provisioningState"] == "Deleting"
    p.machines.group_poll_seconds = 0.05
    threading.Timer(0.5, arm.state.settle).start()  # Azure finishes the delete a moment later
    [again] = p.launch(request(options={"generation": 1}))
    assert again.state == InstanceState.RUNNING and again.instance_id.endswith("-g1-0")
    group_puts = [r for r in arm.state.requests if r[0] == "PUT" and r[1].lower().endswith("/gpuplan-r-az1")]
    assert len(group_puts) >= 3  # the first launch's, at least one refused (409) while deleting, the last


def test_every_nodes_custom_data_lists_every_nodes_address_in_rank_order(arm: RunningArm) -> None:
    """GPUPLAN_NODE_IPS (SkyPilot's SKYPILOT_NODE_IPS) on Azure: orchestration's real renderer, a three-node launch
    through the SDK, and each VM's custom data names the three NICs' addresses, rank 0 first (before: none, so a
    node listed rank 0's address only)."""
    from gpuplan.launching.placements import with_boot_scripts

    p = provider()
    req = request(run_id="r-az3", nodes=3, boot_script=None, options={"argv": ["/bin/sh", "-c", "true"]})
    p.launch(with_boot_scripts(req, p))
    ips = _nic_ips(arm)
    ordered = [ips[f"gpuplan-r-az3-{rank}-nic"] for rank in range(3)]
    assert len(set(ordered)) == 3
    for rank in range(3):
        script = _custom_data(arm, "gpuplan-r-az3", f"gpuplan-r-az3-{rank}")
        assert f"NODE_ADDRS=({' '.join(ordered)})" in script.splitlines()
        assert f"MASTER_ADDR_={ordered[0]}" in script.splitlines()


def test_a_relaunched_node_lists_the_running_nodes_addresses_read_back_from_their_nics(arm: RunningArm) -> None:
    """A Spot eviction relaunches only the evicted rank (next generation): its script lists the surviving rank 0's
    address, read back from rank 0's NIC, and its own new NIC's."""
    rendered: list[tuple[int, list[str]]] = []

    def script_for(rank: int, master: str | None, node_addrs: Sequence[str] = ()) -> str:
        rendered.append((rank, list(node_addrs)))
        return "#!/bin/bash\n"

    p = provider()
    p.launch(request(nodes=2, options={"boot_script_for": script_for}))
    arm.state.evict("gpuplan-r-az1", "gpuplan-r-az1-1")
    rendered.clear()
    again = p.launch(request(nodes=2, options={"boot_script_for": script_for, "generation": 1}))
    assert [i.instance_id.split("/")[1] for i in again] == ["gpuplan-r-az1-0", "gpuplan-r-az1-g1-1"]
    ips = _nic_ips(arm)
    assert rendered == [(1, [ips["gpuplan-r-az1-0-nic"], ips["gpuplan-r-az1-g1-1-nic"]])]


def test_the_size_check_counts_every_nodes_address_a_multi_node_script_carries() -> None:
    """The planned script (rank 0, no addresses) just fits Azure's custom data; with two nodes each VM's script
    also names both addresses, so the launch is refused before anything (before: it passed the check and Azure
    refused the VM)."""
    from gpuplan.errors import UserError
    from gpuplan.launching.placements import with_boot_scripts
    from gpuplan.providers.azure.compute import MAX_CUSTOM_DATA_BYTES

    def planned(nodes: int, pad: int) -> LaunchRequest:
        req = request(run_id="r-azbig", nodes=nodes, boot_script=None, env={"PAD": "x" * pad},
                      options={"argv": ["/bin/sh", "-c", "true"]})
        return with_boot_scripts(req, provider())

    pad = 1 + MAX_CUSTOM_DATA_BYTES - len((planned(2, 1).boot_script or "").encode())
    fitting = planned(2, pad)
    assert len((fitting.boot_script or "").encode()) == MAX_CUSTOM_DATA_BYTES
    provider().check_launch(planned(1, pad))  # one node: the planned script is all
    with pytest.raises(UserError, match="65535"):
        provider().check_launch(fitting)


def test_a_nic_keeps_its_private_address_when_put_again_and_a_taken_static_one_is_refused(arm: RunningArm) -> None:
    """The fake's `private_ips` rule, as a retried launch meets it: ensure_nic PUTs the same NIC again and gets the
    same address (Azure keeps a dynamic address until the NIC is deleted); a static address another NIC holds is
    refused. Without the rule, every PUT took a new address."""
    from azure.core.exceptions import HttpResponseError

    from gpuplan.providers.azure.network import ensure_network, ensure_nic, ensure_resource_group

    session = provider().session
    ensure_resource_group(session, "gpuplan-r-nic", "eastus", {})
    subnet = ensure_network(session, "gpuplan-r-nic", "eastus", {}, None)
    first = ensure_nic(session, "gpuplan-r-nic", "eastus", "vm-0", subnet, {}, public_ip=False)
    second = ensure_nic(session, "gpuplan-r-nic", "eastus", "vm-1", subnet, {}, public_ip=False)
    again = ensure_nic(session, "gpuplan-r-nic", "eastus", "vm-0", subnet, {}, public_ip=False)
    assert (first.private_ip, second.private_ip, again.private_ip) == ("10.64.0.4", "10.64.0.5", "10.64.0.4")
    with pytest.raises(HttpResponseError, match="PrivateIPAddressInUse"):
        session.network.network_interfaces.begin_create_or_update("gpuplan-r-nic", "static-nic", {
            "location": "eastus", "properties": {"ipConfigurations": [{"name": "primary", "properties": {
                "subnet": {"id": subnet}, "privateIPAllocationMethod": "Static",
                "privateIPAddress": "10.64.0.5"}}]}}).result()
