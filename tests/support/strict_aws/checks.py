"""Checks a test asks of the layer about launched instances. Real EC2 accepts these launches; the job then fails on
the machine (ranks that cannot reach each other, a boot script without credentials), so tests assert them here.

Docs:
- A new security group "Allows no inbound traffic; Allows all outbound traffic":
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/default-custom-security-groups.html
- "To allow instances that are associated with the same security group to communicate with each other, you must
  explicitly add rules for this" (a rule whose source is the group's own ID):
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/security-group-rules-reference.html#sg-rules-other-instances
- "An EFA requires a security group that allows all inbound and outbound traffic to and from the security group
  itself": https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html
- Code on an instance gets AWS credentials only from the role of its instance profile ("An application on the
  instance retrieves the security credentials provided by the role from the instance metadata item
  iam/security-credentials/role-name"): https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/iam-roles-for-amazon-ec2.html
"""

from __future__ import annotations

import base64
import gzip
import ipaddress
import re
from typing import Any

from .view import MotoView

_PROTOCOLS = {"tcp": "6", "udp": "17", "icmp": "1"}


def _allows(permission: dict[str, Any], protocol: str, port: int | None, peer_groups: set[str],
            peer_ip: str | None) -> bool:
    """One IpPermission allows traffic of `protocol`/`port` from (or to) a peer with these groups or this address."""
    rule_protocol = str(permission.get("IpProtocol", ""))
    if rule_protocol not in ("-1", protocol, _PROTOCOLS.get(protocol, protocol)):
        return False
    if rule_protocol != "-1" and port is not None:
        low, high = permission.get("FromPort", -1), permission.get("ToPort", -1)
        if low != -1 and not (low <= port <= high):
            return False
    if any(pair.get("GroupId") in peer_groups for pair in permission.get("UserIdGroupPairs", [])):
        return True
    if peer_ip:
        address = ipaddress.ip_address(peer_ip)
        for block in permission.get("IpRanges", []):
            if address in ipaddress.ip_network(block["CidrIp"], strict=False):
                return True
    return False


def _inbound(group: dict[str, Any]) -> list[dict[str, Any]]:
    """A group's inbound rules. A VPC's default group comes with a rule allowing "inbound traffic from network
    interfaces and instances that are assigned to the same security group" (default-custom-security-groups.html);
    moto creates it without that rule, so it is added here (real accounts may have removed it; moto cannot say)."""
    rules = list(group.get("IpPermissions", []))
    if group.get("GroupName") == "default":
        rules.append({"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group["GroupId"]}]})
    return rules


def _groups(instance: dict[str, Any]) -> set[str]:
    groups = {g["GroupId"] for g in instance.get("SecurityGroups", [])}
    for nic in instance.get("NetworkInterfaces", []):
        groups |= {g["GroupId"] for g in nic.get("Groups", [])}
    return groups


def reachable(view: MotoView, source_id: str, destination_id: str, *, region: str = "us-east-1",
              protocol: str = "tcp", port: int | None = None) -> bool:
    """Whether `source` can open a connection to `destination` (e.g. torchrun's rendezvous port): an outbound rule of
    a source group allows the destination, and an inbound rule of a destination group allows the source (by group,
    the self-referencing case, or by a CIDR holding its private address). Security groups are stateful, so the
    replies need no rule."""
    found = {i["InstanceId"]: i for i in view.instances(region, [source_id, destination_id])}
    source, destination = found[source_id], found[destination_id]
    source_groups, destination_groups = _groups(source), _groups(destination)
    groups = {g["GroupId"]: g for g in view.security_groups(region, sorted(source_groups | destination_groups))}
    outbound = any(_allows(p, protocol, port, destination_groups, destination.get("PrivateIpAddress"))
                   for gid in source_groups for p in groups[gid].get("IpPermissionsEgress", []))
    inbound = any(_allows(p, protocol, port, source_groups, source.get("PrivateIpAddress"))
                  for gid in destination_groups for p in _inbound(groups[gid]))
    return outbound and inbound


def efa_ready(view: MotoView, instance_id: str, *, region: str = "us-east-1") -> bool:
    """Some group of the instance allows all traffic (-1) in from itself and out to itself (efa-start.html). The
    default all-address egress rule does not count: EFA's OS-bypass traffic is not IP."""
    instance = view.instances(region, [instance_id])[0]
    for group in view.security_groups(region, sorted(_groups(instance))):
        gid = group["GroupId"]

        def self_rule(permissions: list[dict[str, Any]], gid: str = gid) -> bool:
            return any(p.get("IpProtocol") == "-1" and any(u.get("GroupId") == gid for u in p.get("UserIdGroupPairs",
                       [])) for p in permissions)

        if self_rule(_inbound(group)) and self_rule(group.get("IpPermissionsEgress", [])):
            return True
    return False


def credentials_on_instance(view: MotoView, instance_id: str, *, region: str = "us-east-1") -> bool:
    """True only when the instance was launched with an instance profile: without one there are no credentials in
    the instance metadata and the SDK on the instance raises NoCredentialsError ("Unable to locate credentials")."""
    instance = view.instances(region, [instance_id])[0]
    return bool(instance.get("IamInstanceProfile"))


def user_data(view: MotoView, instance_id: str, *, region: str = "us-east-1") -> bytes:
    """The instance's raw user data (base64-decoded, and gunzipped when it is gzip, as cloud-init does)."""
    answer = view.client("ec2", region).describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    encoded = answer.get("UserData", {}).get("Value", "")
    raw = base64.b64decode(encoded) if encoded else b""
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


# A boot script needs AWS credentials when it reads SSM parameters or Secrets Manager, or ships to/from S3.
_NEEDS_CREDENTIALS = re.compile(
    rb"ssm\s+get-parameters?\b|get_parameters?\(|GetParameters?\b|secretsmanager|s3://|\bs3\s+(cp|sync|mv)\b|s3api",
    re.IGNORECASE)


def user_data_needs_credentials(data: bytes | str) -> bool:
    """Whether a boot script (raw or gzip) reads SSM parameters/secrets or ships to s3:// — and so needs credentials."""
    raw = data.encode() if isinstance(data, str) else data
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return bool(_NEEDS_CREDENTIALS.search(raw))


def boot_has_credentials_it_needs(view: MotoView, instance_id: str, *, region: str = "us-east-1") -> bool:
    """False exactly when the instance's user data needs credentials and the instance has no instance profile."""
    if not user_data_needs_credentials(user_data(view, instance_id, region=region)):
        return True
    return credentials_on_instance(view, instance_id, region=region)
