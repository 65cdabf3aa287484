"""The extra GPU data NICs of a multi-node A3 run: GPUDirect-TCPX (A3 High, A3 Edge) and -TCPXO (A3 Mega).

Why: an A3 VM with one NIC sends NCCL's traffic through its primary interface; the GPU bandwidth Google sells comes
through the data NICs, and a VM gets them only when it is created with them (an interface cannot be added later:
https://cloud.google.com/vpc/docs/multiple-interfaces-concepts). The documented setup, per machine type:

- a3-highgpu-8g and a3-edgegpu-8g: the primary NIC plus 4 data NICs, "up to four secondary NICs, each supporting up
  to 200 Gbps bandwidth for GPU data transfer" (GPUDirect-TCPX:
  https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx#about; the VM recipe
  https://cloud.google.com/compute/docs/gpus/gpudirect). a3-megagpu-8g: a NIC arrangement of 8+1, eight data NICs
  for GPUDirect-TCPXO (https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth, "A3 Mega ... 8+1").
  A3 VMs with 1-4 GPUs have a single NIC (same page: "Single NIC A3 VMs") and get nothing here.
- Each NIC on its own VPC network ("each NIC in a separate VPC", the recipe; "Each network interface of an instance
  must be in a different VPC network": https://cloud.google.com/vpc/docs/multiple-interfaces-concepts), each network
  in custom subnet mode with MTU 8244 (the recipe's `gcloud compute networks create ... --subnet-mode=custom
  --mtu=8244`; Vertex's A3 Mega networking page says the same MTU), a subnet in the VM's region, and a firewall rule
  letting the run's VMs reach each other on it (providers/gcp/firewall.py: every VPC network denies ingress).
- nicType GVNIC on every interface: A3 VMs use Google Virtual NIC
  (https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth, "we recommend that you use gVNIC"; the recipe
  passes `nic-type=GVNIC` on each interface).

Created or reused, consciously: the networks `gpuplan-gpu-data-1` .. `-8`, one subnet per region each
(`gpuplan-gpu-data-N-<region>`, a /24 of 10.(200+N).0.0/16 no other subnet of that network uses) and their
firewall rules are made once and REUSED by every later A3 run; they are not deleted at a run's end. VPC networks,
subnets and firewall rules cost nothing (https://cloud.google.com/vpc/pricing: charges are for traffic, IP addresses
and NAT, not for networks), and deleting them while another run's VMs use them would fail or cut that run off.
Networks take no labels: the name and the description mark them as gpuplan's; docs/providers/gcp.md gives the
gcloud commands that remove them. A network of that name gpuplan did not make is used as it is (the user made it
for this purpose), with a warning when its MTU is below 8244.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from typing import Any

from gpuplan.providers.base import AuthError, ProviderError
from gpuplan.providers.gcp.firewall import ensure_internal_rule
from gpuplan.providers.gcp.idempotent import create_once, read_existing
from gpuplan.providers.gcp.rules import last_segment, map_api_error

log = logging.getLogger(__name__)

# machine type -> (GPUDirect flavour, data NICs besides the primary one); the module doc cites each.
DATA_NICS: dict[str, tuple[str, int]] = {
    "a3-highgpu-8g": ("tcpx", 4),
    "a3-edgegpu-8g": ("tcpx", 4),
    "a3-edgegpu-8g-nolssd": ("tcpx", 4),
    "a3-megagpu-8g": ("tcpxo", 8),
}
DATA_MTU = 8244
NETWORK_PREFIX = "gpuplan-gpu-data-"
DESCRIPTION = "gpuplan: GPU data network for GPUDirect-TCPX(O) multi-node runs; created-by gpuplan; kept and reused"
# Series whose VMs use gVNIC on every interface (module doc).
GVNIC_SERIES = ("a3-", "a4-")


@dataclass(frozen=True)
class DataNic:
    """One data NIC of a VM: its network and its subnet in the VM's region (project-qualified paths)."""

    network: str
    subnetwork: str


def data_fabric(machine_type: str, nodes: int) -> tuple[str, int] | None:
    """(flavour, count) of data NICs a run of `nodes` VMs of `machine_type` gets; None for one node or other types."""
    return DATA_NICS.get(machine_type) if nodes > 1 else None


def wants_gvnic(machine_type: str) -> bool:
    return machine_type.startswith(GVNIC_SERIES)


def network_name(index: int) -> str:
    return f"{NETWORK_PREFIX}{index}"


def subnet_name(index: int, region: str) -> str:
    return f"{network_name(index)}-{region}"[:63].rstrip("-")


def _free_range(index: int, used: list[str]) -> str:
    """The first /24 of 10.(200+index).0.0/16 overlapping none of `used` (a network's subnets may not overlap)."""
    taken = [ipaddress.ip_network(u, strict=False) for u in used if u]
    for candidate in ipaddress.ip_network(f"10.{200 + index}.0.0/16").subnets(new_prefix=24):
        if not any(candidate.overlaps(t) for t in taken):
            return str(candidate)
    raise ProviderError(f"network {network_name(index)} has no free /24 left in 10.{200 + index}.0.0/16",
                        code="NoSubnetRange")


def ensure_data_nics(provider: Any, region: str, count: int) -> list[DataNic]:
    """The `count` data networks with a subnet in `region` and a firewall rule each, made where missing."""
    nics = []
    for index in range(1, count + 1):
        network = _ensure_network(provider, index)
        subnetwork = _ensure_subnet(provider, index, region, network)
        ensure_internal_rule(provider, network_name(index))
        nics.append(DataNic(network, subnetwork))
    return nics


def _refused(exc: Exception, what: str) -> ProviderError:
    from google.api_core import exceptions as gexc

    if isinstance(exc, (gexc.Forbidden, gexc.PermissionDenied)):
        return AuthError(f"a multi-node A3 run needs {what} for its GPU data NICs, and this account may not create "
                         f"it ({exc.message}); grant roles/compute.networkAdmin or create it as "
                         "docs/providers/gcp.md shows", code="DataNetworkMissing")
    return map_api_error(exc)


def _ensure_network(provider: Any, index: int) -> str:
    from google.cloud import compute_v1

    name = network_name(index)
    path = f"projects/{provider.project}/global/networks/{name}"
    networks = provider.client("NetworksClient")

    def refused(exc: Exception) -> ProviderError:
        return _refused(exc, f"network {name}")

    found = read_existing(lambda: networks.get(project=provider.project, network=name), refused)
    if found is not None:
        if found.mtu and found.mtu < DATA_MTU:
            log.warning("network %s has MTU %d; GPUDirect-TCPX wants %d (its traffic will be slower)", name,
                        found.mtu, DATA_MTU)
        return path
    body = compute_v1.Network(name=name, auto_create_subnetworks=False, mtu=DATA_MTU, description=DESCRIPTION)

    def create() -> None:  # another launch may make it meanwhile
        operation = networks.insert(project=provider.project, network_resource=body)
        provider.client("GlobalOperationsClient").wait(project=provider.project, operation=operation.name)

    create_once(create, refused)
    return path


def _ensure_subnet(provider: Any, index: int, region: str, network: str) -> str:
    from google.cloud import compute_v1

    name = subnet_name(index, region)
    path = f"projects/{provider.project}/regions/{region}/subnetworks/{name}"
    subnets = provider.client("SubnetworksClient")
    used: list[str] = []
    try:
        for _scope, scoped in subnets.aggregated_list(project=provider.project):
            for subnet in scoped.subnetworks:
                if last_segment(subnet.network) != network_name(index):
                    continue
                if last_segment(subnet.region) == region:
                    return path if subnet.name == name else (
                        f"projects/{provider.project}/regions/{region}/subnetworks/{subnet.name}")
                used.append(subnet.ip_cidr_range)
    except Exception as exc:
        raise _refused(exc, f"a subnet of {network_name(index)} in {region}") from exc
    body = compute_v1.Subnetwork(name=name, network=network, region=region, ip_cidr_range=_free_range(index, used),
                                 description=DESCRIPTION)

    def create() -> None:
        operation = subnets.insert(project=provider.project, region=region, subnetwork_resource=body)
        provider.client("RegionOperationsClient").wait(project=provider.project, region=region,
                                                       operation=operation.name)

    create_once(create, lambda exc: _refused(exc, f"subnet {name}"))
    return path
