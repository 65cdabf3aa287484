"""Issue 32 item 5: a multi-node GCP run on a network of the user's own gets a firewall rule between its VMs (VPC
networks deny all ingress but on the auto `default` network), made once, reused, or refused with the rule to add.
The fake's firewalls are mechanics; tests/support/strict_gce.reachable decides reachability as GCE's rules do."""

from __future__ import annotations

import pytest

from gpuplan.providers.base import AuthError, LaunchRequest
from gpuplan.providers.gcp.provider import GcpProvider

from support.fakes.gce_server import RunningFake
from support.strict_gce import reachable

NETWORK = "global/networks/train-net"


def req(run_id: str, **kw: object) -> LaunchRequest:
    fields: dict[str, object] = {"run_id": run_id, "name": "fw", "command": "true", "run_dir": "/tmp/fw", "gpu": "T4",
                                 "gpus_per_node": 1, "instance_type": "n1-standard-8", "nodes": 2,
                                 "zones": ("us-central1-a",), "boot_script": "#!/bin/sh\ntrue\n"}
    fields.update(kw)
    return LaunchRequest(**fields)  # type: ignore[arg-type]


@pytest.fixture
def provider(gce: RunningFake) -> GcpProvider:
    return GcpProvider(retry_initial=0.01, retry_timeout=5, network=NETWORK)


def _vms(gce: RunningFake, run_id: str) -> list[dict[str, object]]:
    return sorted((vm for vm in gce.state.live() if run_id.lower() in str(vm["name"])), key=lambda v: str(v["name"]))


def test_the_check_a_plain_fake_lacks_nodes_on_their_own_network_cannot_reach_each_other(gce: RunningFake) -> None:
    own = {"networkInterfaces": [{"network": NETWORK}], "tags": {"items": ["gpuplan"]}}
    default = {"networkInterfaces": [{"network": "global/networks/default"}], "tags": {"items": ["gpuplan"]}}
    assert reachable(gce.state, default, default)  # default-allow-internal
    assert not reachable(gce.state, own, own)  # the implied deny-ingress rule


def test_a_multi_node_run_on_its_own_network_gets_one_rule_between_its_vms(provider: GcpProvider,
                                                                           gce: RunningFake) -> None:
    provider.launch(req("r-fw00000001"))
    rank0, rank1 = _vms(gce, "r-fw00000001")
    assert reachable(gce.state, rank1, rank0) and reachable(gce.state, rank0, rank1)
    [rule] = gce.state.firewalls.values()
    assert rule["name"] == "gpuplan-internal-train-net" and rule["sourceTags"] == rule["targetTags"] == ["gpuplan"]
    assert rule["network"].endswith("/global/networks/train-net") and "gpuplan" in rule["description"]
    provider.launch(req("r-fw00000002"))  # reused, not made again
    assert len(gce.state.firewalls) == 1
    assert gce.state.count_calls("POST", "/global/firewalls") == 1


def test_single_nodes_and_the_default_network_need_no_rule(gce: RunningFake) -> None:
    GcpProvider(retry_initial=0.01, retry_timeout=5, network=NETWORK).launch(req("r-fw00000003", nodes=1))
    GcpProvider(retry_initial=0.01, retry_timeout=5).launch(req("r-fw00000004"))
    assert gce.state.firewalls == {}


def test_without_permission_the_launch_ends_with_the_rule_to_add(provider: GcpProvider, gce: RunningFake) -> None:
    gce.state.firewall_insert_denied = True
    with pytest.raises(AuthError) as caught:
        provider.launch(req("r-fw00000005"))
    assert ("gcloud compute firewall-rules create gpuplan-internal-train-net --network=train-net --direction=INGRESS "
            "--allow=all --source-tags=gpuplan --target-tags=gpuplan") in str(caught.value)
    assert _vms(gce, "r-fw00000005") == []  # refused before any VM started
