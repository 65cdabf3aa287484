"""This account's zones and regions as EC2 reports them: zone ids <-> names, Local Zones, opt-in regions.

Why each rule (the documented behaviour is the contract):

- Zone NAMES are per account, zone IDS are not. "the us-east-1a for your AWS account might not be the same physical
  location as the us-east-1a for another AWS account" / "use1-az1 ... has the same physical location in every AWS
  account" (https://docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html). The price catalog holds
  ids (gpuplan.catalog.offer); RunInstances' `Placement.AvailabilityZone` and the `availability-zone` subnet filter
  take names (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Placement.html). So every zone gpuplan
  sends is a name resolved here with DescribeAvailabilityZones (ZoneId <-> ZoneName), once per region.
- Local and Wavelength Zones (`ZoneType` local-zone / wavelength-zone,
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_AvailabilityZone.html) must be enabled and given a
  subnet first ("To use a Local Zone, you must first enable it. Next, you create a subnet in the Local Zone",
  https://docs.aws.amazon.com/local-zones/latest/ug/how-local-zones-work.html): gpuplan tries them only when the
  spec names them (`resources.zones`).
- Regions launched after 2019-03-20 are disabled until the account enables them
  (https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-regions.html); DescribeRegions with
  AllRegions=True reports each region's OptInStatus: opt-in-not-required | opted-in | not-opted-in
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeRegions.html). A call into a disabled region
  answers AuthFailure, the same code as bad credentials, so this status is the only way to tell them apart.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuplan.catalog.zones import aws_standard_zone
from gpuplan.providers.base import PlacementError, Scope

log = logging.getLogger(__name__)

STANDARD_ZONE_TYPE = "availability-zone"
NOT_ENABLED = "not-opted-in"
OPT_IN_REGION = frozenset({"opted-in", NOT_ENABLED})  # regions the account had to enable: not default regions


def standard_zone(zone: str) -> bool:
    """True for an Availability Zone's name or id; False for a Local/Wavelength Zone (or anything else): what
    planning can tell from the catalog alone, before any call (the launch re-checks ZoneType). The rule lives in
    gpuplan.catalog.zones, which `gpuplan plan` shares."""
    return aws_standard_zone(zone)


@dataclass(frozen=True)
class Zone:
    """One zone of a region as this account sees it (DescribeAvailabilityZones)."""

    name: str
    zone_id: str
    zone_type: str = STANDARD_ZONE_TYPE
    state: str = "available"

    @property
    def standard(self) -> bool:
        return self.zone_type == STANDARD_ZONE_TYPE


class AccountZones:
    """Each region's zones, asked once per region and kept (they do not change during a launch).

    Without `AllAvailabilityZones`, DescribeAvailabilityZones lists every Availability Zone and only the Local and
    Wavelength Zones the account has opted in to (API_DescribeAvailabilityZones.html), which is what a launch can use.
    Errors are botocore's: the provider maps them with the region's opt-in status (gpuplan.providers.aws.rules).
    """

    def __init__(self, ec2_for: Callable[[str], Any]) -> None:
        self._ec2_for = ec2_for
        self._zones: dict[str, list[Zone]] = {}

    def of(self, region: str) -> list[Zone]:
        if region not in self._zones:
            response = self._ec2_for(region).describe_availability_zones()
            self._zones[region] = [
                Zone(z["ZoneName"], z.get("ZoneId") or z["ZoneName"], z.get("ZoneType") or STANDARD_ZONE_TYPE,
                     z.get("State") or "available")
                for z in response.get("AvailabilityZones", [])]
        return self._zones[region]

    def find(self, region: str, ref: str) -> Zone | None:
        """The zone `ref` names in `region`, by name or by id (the catalog's form); None if the account has none."""
        return next((z for z in self.of(region) if ref in (z.name, z.zone_id)), None)

    def launchable(self, region: str) -> list[str]:
        """Names of the region's available standard Availability Zones, in name order (failover's order)."""
        return sorted(z.name for z in self.of(region) if z.standard and z.state == "available")

    def named(self, region: str, refs: Sequence[str]) -> list[str]:
        """Names of the zones of `region` that `refs` name (names or ids; Local Zones included), in refs' order."""
        out: list[str] = []
        for ref in refs:
            zone = self.find(region, ref)
            if zone is not None and zone.name not in out:
                out.append(zone.name)
        return out


def launch_zone(zones: AccountZones, region: str, ref: str | None, named: Sequence[str]) -> str | None:
    """The zone NAME to send for a zone a request names by name or id (the catalog's form); None for none.

    A zone this account does not have blocks that zone; a Local/Wavelength Zone the spec did not name (in
    `named`, by name or id) is refused before any launch call, blocking that zone.
    """
    if ref is None:
        return None
    zone = zones.find(region, ref)
    if zone is None:
        raise PlacementError(f"zone {ref} is not one of this account's zones in {region}", code="NoSuchZone",
                             scope=Scope(region=region, zone=ref), region=region, zone=ref)
    if not zone.standard and not {ref, zone.name, zone.zone_id} & set(named):
        raise PlacementError(f"{zone.name} ({zone.zone_id}) is a {zone.zone_type}: used only when the spec names it "
                             "in resources.zones", code="NotNamedZone", scope=Scope(region=region, zone=zone.name),
                             region=region, zone=zone.name)
    return zone.name


class AccountRegions:
    """OptInStatus of every region (DescribeRegions AllRegions=True), asked once; None when it cannot be asked.

    Only an AuthError-class failure of this call itself propagates (the caller decides); anything else (no
    permission for ec2:DescribeRegions, no endpoint) leaves the status unknown: every region is then tried and a
    refusal is handled by failover.
    """

    def __init__(self, ec2: Callable[[], Any]) -> None:
        self._ec2 = ec2
        self._status: dict[str, str] | None = None
        self._asked = False

    def status(self) -> dict[str, str] | None:
        if not self._asked:
            self._asked = True
            response = self._ec2().describe_regions(AllRegions=True)
            self._status = {r["RegionName"]: r.get("OptInStatus") or "opt-in-not-required"
                            for r in response.get("Regions", [])}
        return self._status

    def forget(self) -> None:
        self._asked, self._status = False, None

    def enabled(self) -> frozenset[str] | None:
        status = self.status()
        return None if status is None else frozenset(r for r, s in status.items() if s != NOT_ENABLED)


# The On-Demand vCPU quotas, one per family group: "There are five vCPU-based instance limits; each defines the
# amount of capacity you can use of a given instance family ... Running On-Demand Standard (A, C, D, H, I, M, R, T,
# Z) instances, ... F instances, ... G instances [G and VT], ... Inf instances, ... P instances, ... X instances",
# and "the On-Demand Instance limits for an AWS account are set on a per-region basis" (https://aws.amazon.com/ec2/faqs/).
# Spot has its own quotas per group (e.g. "All P Spot Instance Requests"), so a quota scope also carries the market.
_FAMILY_GROUPS = {"p": "P", "g": "G", "vt": "G", "f": "F", "inf": "Inf", "x": "X", "dl": "DL", "trn": "Trn",
                  "hpc": "HPC", "u": "HighMemory", "mac": "Mac"}
_STANDARD_LETTERS = frozenset("acdhimrtz")


def instance_family(instance_type: str | None) -> str | None:
    """The vCPU quota group an instance type counts against: p4d.24xlarge -> P, g5g.xlarge -> G, m5.large ->
    Standard."""
    if not instance_type:
        return None
    match = re.match(r"[a-z]+", instance_type)
    if match is None:
        return instance_type
    prefix = match.group()
    for length in range(len(prefix), 0, -1):
        if prefix[:length] in _FAMILY_GROUPS:
            return _FAMILY_GROUPS[prefix[:length]]
    return "Standard" if prefix[0] in _STANDARD_LETTERS else prefix.upper()
