"""What the layer asks moto to decide a rule: zones, images, instance types, subnets, instances, security groups.

The layer talks to moto directly (not through itself) with botocore clients signed with the fake `testing` keys; the
answers are moto's own data, so a rule is checked against the state the request will meet.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

FAKE_KEY = "testing"


@dataclass
class MotoView:
    """Cached botocore clients on the moto server behind the layer."""

    endpoint: str
    _clients: dict[tuple[str, str], Any] = field(default_factory=dict)
    _types: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    _zones: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def client(self, service: str, region: str) -> Any:
        with self._lock:
            key = (service, region)
            if key not in self._clients:
                session = boto3.session.Session(aws_access_key_id=FAKE_KEY, aws_secret_access_key=FAKE_KEY)
                self._clients[key] = session.client(service, region_name=region, endpoint_url=self.endpoint,
                                                    config=Config(retries={"total_max_attempts": 1}))
            return self._clients[key]

    def zones(self, region: str) -> list[dict[str, Any]]:
        """moto's zones of the region (its fixed name<->ID mapping, all of type availability-zone; the same after a
        reset, so cached for the run)."""
        if region not in self._zones:
            self._zones[region] = list(self.client("ec2", region).describe_availability_zones(
                AllAvailabilityZones=True)["AvailabilityZones"])
        return self._zones[region]

    def regions(self) -> list[dict[str, Any]]:
        return list(self.client("ec2", "us-east-1").describe_regions(AllRegions=True)["Regions"])

    def image(self, region: str, image_id: str) -> dict[str, Any] | None:
        try:
            images = self.client("ec2", region).describe_images(ImageIds=[image_id])["Images"]
        except ClientError:
            return None
        return images[0] if images else None

    def instance_type(self, instance_type: str) -> dict[str, Any] | None:
        """DescribeInstanceTypes for one type (the same in every region in moto; cached for the run)."""
        if instance_type not in self._types:
            try:
                found = self.client("ec2", "us-east-1").describe_instance_types(InstanceTypes=[instance_type])
                self._types[instance_type] = found["InstanceTypes"][0] if found["InstanceTypes"] else None
            except ClientError:
                self._types[instance_type] = None
        return self._types[instance_type]

    def subnet(self, region: str, subnet_id: str) -> dict[str, Any] | None:
        try:
            subnets = self.client("ec2", region).describe_subnets(SubnetIds=[subnet_id])["Subnets"]
        except ClientError:
            return None
        return subnets[0] if subnets else None

    def instances(self, region: str, instance_ids: list[str]) -> list[dict[str, Any]]:
        if not instance_ids:
            return []
        try:
            reservations = self.client("ec2", region).describe_instances(InstanceIds=instance_ids)["Reservations"]
        except ClientError:
            return []
        return [i for r in reservations for i in r["Instances"]]

    def security_groups(self, region: str, group_ids: list[str]) -> list[dict[str, Any]]:
        if not group_ids:
            return []
        return list(self.client("ec2", region).describe_security_groups(GroupIds=group_ids)["SecurityGroups"])
