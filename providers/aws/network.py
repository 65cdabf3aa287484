"""How a run's machines reach each other: security group rules, EFA interfaces, cluster placement groups.

Least privilege: gpuplan's group `gpuplan` allows nothing from outside; it allows all traffic between its own
members (in and out), which a multi-node run needs and nothing else gets. SSH is a separate group, opened to one
address, only when configured. Rules and their documentation:

- A new group "Allows no inbound traffic; Allows all outbound traffic"
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/default-custom-security-groups.html). "To allow instances
  that are associated with the same security group to communicate with each other, you must explicitly add rules
  for this" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/security-group-rules-reference.html
  #sg-rules-other-instances): without the self-referencing inbound rule rank 1 cannot reach rank 0's rendezvous
  port and torchrun hangs until the fail-safe.
- "An EFA requires a security group that allows all inbound and outbound traffic to and from the security group
  itself" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html): so the self rule is added as
  egress too (EFA's OS-bypass traffic is not matched by the default 0.0.0.0/0 egress rule).
- An existing rule answers `InvalidPermission.Duplicate`: treated as done (a group made by an older gpuplan gets
  its rules on the next launch).
- EFA: DescribeInstanceTypes `NetworkInfo.EfaSupported`; the interface is `InterfaceType: efa` in
  `NetworkInterfaces`, which then carries the subnet and groups itself (instance-level SubnetId/SecurityGroupIds
  cannot be combined with NetworkInterfaces; https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RunInstances.html).
- Cluster placement groups: "Use a single launch request to launch the number of instances that you need in the
  placement group" and deletion needs its instances terminated first, else `InvalidPlacementGroup.InUse`
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-groups.html; the error on
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from gpuplan.providers.aws.instance_types import TypeInfo
from gpuplan.providers.aws.rules import map_client_error, tag_list
from gpuplan.providers.base import PlacementError, Scope

log = logging.getLogger(__name__)

GROUP_TAGS = {"gpuplan:created-by": "gpuplan"}
PLACEMENT_GROUP_PREFIX = "gpuplan-"


def _code(exc: Exception) -> str | None:
    from botocore.exceptions import ClientError

    return str(exc.response.get("Error", {}).get("Code")) if isinstance(exc, ClientError) else None


def self_rule(group_id: str) -> list[dict[str, Any]]:
    """All protocols, all ports, from/to members of the group itself (and nothing else)."""
    return [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id, "Description": "gpuplan nodes"}]}]


def ssh_group_name(cidr: str) -> str:
    """The name of gpuplan's group that opens port 22 to one address (`gpuplan-ssh-203-0-113-7_32`): one group per
    address, shared by the launches and `gpuplan ssh --via ip` that ask for it."""
    return "gpuplan-ssh-" + cidr.replace("/", "_").replace(".", "-").replace(":", "-")


def ssh_rule(cidr: str) -> list[dict[str, Any]]:
    v6 = ":" in cidr
    return [{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
             "IpRanges": [] if v6 else [{"CidrIp": cidr, "Description": "gpuplan ssh"}],
             "Ipv6Ranges": [{"CidrIpv6": cidr, "Description": "gpuplan ssh"}] if v6 else []}]


def _authorize(ec2: Any, group_id: str, permissions: list[dict[str, Any]], *, egress: bool = False) -> None:
    call = ec2.authorize_security_group_egress if egress else ec2.authorize_security_group_ingress
    try:
        call(GroupId=group_id, IpPermissions=permissions)
    except Exception as exc:
        if _code(exc) != "InvalidPermission.Duplicate":
            raise


def _has_self(permissions: list[Mapping[str, Any]], group_id: str) -> bool:
    return any(p.get("IpProtocol") == "-1" and any(pair.get("GroupId") == group_id
                                                   for pair in p.get("UserIdGroupPairs") or ())
               for p in permissions)


def find_subnet(ec2: Any, region: str, zone: str | None, subnet_id: str | None) -> dict[str, Any]:
    """The explicit subnet, else the default VPC's default subnet of the zone (or of any zone)."""
    if subnet_id:
        subnets = ec2.describe_subnets(SubnetIds=[subnet_id])["Subnets"]
    else:
        filters = [{"Name": "default-for-az", "Values": ["true"]}]
        if zone:
            filters.append({"Name": "availability-zone", "Values": [zone]})
        subnets = ec2.describe_subnets(Filters=filters)["Subnets"]
    if not subnets:
        where = zone or region
        raise PlacementError(f"no default subnet in {where}; pass a subnet id (options.subnet_id)",
                             code="NoSubnet", scope=Scope(region=region, zone=zone), region=region, zone=zone)
    return dict(sorted(subnets, key=lambda s: s["AvailabilityZone"])[0])


def ensure_group(ec2: Any, vpc_id: str, name: str, description: str, *, self_rules: bool = False,
                 ssh_cidr: str | None = None) -> str:
    """gpuplan's tagged group `name` in the VPC, with its rules; created when missing, rules added when missing."""
    found = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]},
                                                  {"Name": "vpc-id", "Values": [vpc_id]}])["SecurityGroups"]
    if found:
        group = found[0]
        group_id = str(group["GroupId"])
        if self_rules and not _has_self(group.get("IpPermissions") or [], group_id):
            _authorize(ec2, group_id, self_rule(group_id))
        if self_rules and not _has_self(group.get("IpPermissionsEgress") or [], group_id):
            _authorize(ec2, group_id, self_rule(group_id), egress=True)
        return group_id
    try:
        group_id = str(ec2.create_security_group(
            GroupName=name, Description=description, VpcId=vpc_id,
            TagSpecifications=[{"ResourceType": "security-group",
                                "Tags": tag_list({**GROUP_TAGS, "Name": name})}])["GroupId"])
    except Exception as exc:
        if _code(exc) != "InvalidGroup.Duplicate":
            raise
        # Another gpuplan created it between our look-up and create: use theirs (and see to its rules).
        return ensure_group(ec2, vpc_id, name, description, self_rules=self_rules, ssh_cidr=ssh_cidr)
    if self_rules:
        _authorize(ec2, group_id, self_rule(group_id))
        _authorize(ec2, group_id, self_rule(group_id), egress=True)
    if ssh_cidr:
        _authorize(ec2, group_id, ssh_rule(ssh_cidr))
    return group_id


def wants_efa(info: TypeInfo, nodes: int) -> bool:
    """EFA for a multi-node run on a type that has it; a single node gains nothing from it."""
    return nodes > 1 and info.efa_supported


def network_interfaces(subnet: Mapping[str, Any], group_ids: list[str],
                       info: TypeInfo | None = None) -> list[dict[str, Any]]:
    """The run's interfaces: one EFA device per network card, as "Maximize network bandwidth on Amazon EC2 instances
    with multiple network cards" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html) says:

    - the primary (network card 0, device 0) an ENA interface ("You can't use an EFA-only network interface as the
      primary network interface"), carrying the public address;
    - "If the network card index 0 supports EFA", an `efa-only` interface on card 0 at device 1; and one at device 0
      on each further card that offers `efa-only`, up to the type's MaximumEfaInterfaces (p5.48xlarge: 32,
      p4d.24xlarge: 4; one EFA on a p5 gives NCCL 1/32 of its fabric). p6-b300.48xlarge's card 0 is ENA only: its
      16 EFA devices go on cards 1-16 (DescribeInstanceTypes; its 6,400 Gbit/s are those 16 x 400).

    EFA-only interfaces have no IP address (create-efa.html: "You can't assign an IP address to an EFA-only network
    interface"), so the instance keeps one IP interface: the public address the machines need to pull images and
    reach S3/SSM through the default VPC's internet gateway stays possible (AssociatePublicIpAddress: "You cannot
    specify more than one network interface in the request"; the P5 page's use case 1 recommends EFA-only interfaces
    precisely to keep automatic public IP assignment). It follows the subnet's MapPublicIpOnLaunch, as an instance
    launched without interfaces would. A type whose cards do not offer `efa-only` gets one EFA (with ENA) primary.
    """
    common = {"SubnetId": subnet["SubnetId"], "Groups": list(group_ids), "DeleteOnTermination": True}
    public = bool(subnet.get("MapPublicIpOnLaunch"))
    cards = sorted(c for c in set(info.efa_only_cards) if c < info.network_cards)[:info.max_efa_interfaces] \
        if info is not None else []
    if not cards:
        return [{"DeviceIndex": 0, "NetworkCardIndex": 0, "InterfaceType": "efa", **common,
                 "AssociatePublicIpAddress": public}]
    interfaces: list[dict[str, Any]] = [
        {"DeviceIndex": 0, "NetworkCardIndex": 0, "InterfaceType": "interface", **common,
         "AssociatePublicIpAddress": public}]
    interfaces += [{"DeviceIndex": 1 if card == 0 else 0, "NetworkCardIndex": card, "InterfaceType": "efa-only",
                    **common} for card in cards]
    return interfaces


def efa_devices(interfaces: list[Mapping[str, Any]]) -> int:
    """How many EFA devices these interfaces give the machine (what NCCL's aws-ofi-nccl plugin can use)."""
    return sum(1 for i in interfaces if i.get("InterfaceType") in ("efa", "efa-only"))


def placement_group_name(run_id: str) -> str:
    return f"{PLACEMENT_GROUP_PREFIX}{run_id}"


def ensure_placement_group(ec2: Any, name: str, tags: Mapping[str, str], region: str) -> str:
    """A tagged cluster placement group (an existing one of the same name, from a retried launch, is reused)."""
    try:
        ec2.create_placement_group(GroupName=name, Strategy="cluster", TagSpecifications=[
            {"ResourceType": "placement-group", "Tags": tag_list(tags)}])
    except Exception as exc:
        if _code(exc) != "InvalidPlacementGroup.Duplicate":
            raise map_client_error(exc, region=region) from exc
    return name


def delete_placement_group(ec2: Any, name: str, *, attempts: int = 6, delay: float = 5.0) -> bool:
    """Delete a run's placement group once its instances are gone; True when it is gone.

    Terminated instances can keep a group `InUse` for a moment (eventual consistency), so that error is retried
    a few times; a group already gone (`InvalidPlacementGroup.Unknown`) counts as deleted. Best effort: a group
    costs nothing, and the next teardown of the run tries again.
    """
    for attempt in range(attempts):
        try:
            ec2.delete_placement_group(GroupName=name)
            return True
        except Exception as exc:
            code = _code(exc)
            if code == "InvalidPlacementGroup.Unknown":
                return True
            if code != "InvalidPlacementGroup.InUse" or attempt == attempts - 1:
                log.info("placement group %s not deleted: %s", name, exc)
                return False
            time.sleep(delay)
    return False
