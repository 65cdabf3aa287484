"""Regions and zones as the account sees them: the zone table (moto's zones plus Local/Wavelength Zones), region
opt-in, and the Describe*/Modify* answers the layer writes from them.

Docs:
- AZ names are per account, AZ IDs are not: https://docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html
- AvailabilityZone fields (ZoneType, OptInStatus, GroupName):
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_AvailabilityZone.html ; without AllAvailabilityZones
  "the results include only the zones for the Regions where you have chosen the option to opt in"
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeAvailabilityZones.html).
- Local Zones must be enabled before use: https://docs.aws.amazon.com/local-zones/latest/ug/how-local-zones-work.html ;
  enabling is ModifyAvailabilityZoneGroup(OptInStatus=opted-in), "The only valid value is opted-in"
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyAvailabilityZoneGroup.html).
- Region opt-in: https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-regions.html ; DescribeRegions lists
  "the Regions that are enabled for your account, or all Regions" with AllRegions
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeRegions.html).
- DescribeSubnets' `availability-zone` filter takes a zone NAME; a zone ID there matches nothing and is no error
  (filters never fail on an unmatched value) — the layer forwards DescribeSubnets unchanged: moto behaves the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from .model import OPT_IN_REGIONS, LocalZone
from .view import MotoView
from .wire import QueryRequest, Reply, XmlNode, ec2_error, ec2_response


@dataclass(frozen=True)
class Zone:
    """One row of DescribeAvailabilityZones as the layer answers it."""

    name: str
    zone_id: str
    region: str
    zone_type: str
    opt_in_status: str
    group: str
    parent_zone_name: str | None = None
    parent_zone_id: str | None = None

    @property
    def launchable(self) -> bool:
        return self.opt_in_status != "not-opted-in"

    def field(self, name: str) -> str | None:
        return {"zone-name": self.name, "zone-id": self.zone_id, "region-name": self.region,
                "zone-type": self.zone_type, "opt-in-status": self.opt_in_status, "group-name": self.group,
                "network-border-group": self.group, "parent-zone-name": self.parent_zone_name,
                "parent-zone-id": self.parent_zone_id, "state": "available"}.get(name)

    def xml(self) -> XmlNode:
        return XmlNode({"zoneName": self.name, "zoneId": self.zone_id, "zoneState": "available",
                        "regionName": self.region, "zoneType": self.zone_type, "optInStatus": self.opt_in_status,
                        "groupName": self.group, "networkBorderGroup": self.group,
                        "parentZoneName": self.parent_zone_name, "parentZoneId": self.parent_zone_id,
                        "messageSet": []})


def zone_table(view: MotoView, local_zones: list[LocalZone], region: str) -> list[Zone]:
    """moto's zones (all `availability-zone`, which "always" have OptInStatus opt-in-not-required per the
    AvailabilityZone doc) plus the layer's Local/Wavelength Zones of the region."""
    zones = [Zone(z["ZoneName"], z["ZoneId"], region, z.get("ZoneType", "availability-zone"), "opt-in-not-required",
                  region) for z in view.zones(region)]
    zones += [Zone(lz.name, lz.zone_id, region, lz.zone_type, lz.opt_in_status, lz.group, lz.parent_zone_name,
                   lz.parent_zone_id) for lz in local_zones if lz.region == region]
    return zones


def filters(req: QueryRequest) -> dict[str, list[str]]:
    """EC2's `Filter.N.Name` / `Filter.N.Value.M` as name -> values."""
    found: dict[str, list[str]] = {}
    index = 1
    while f"Filter.{index}.Name" in req.params:
        found[req.params[f"Filter.{index}.Name"]] = req.indexed(f"Filter.{index}.Value")
        index += 1
    return found


def _passes(value: str | None, patterns: list[str]) -> bool:
    # EC2 filter values take * and ? wildcards.
    return value is not None and any(fnmatchcase(value, p) for p in patterns)


ZONE_FILTERS = {"zone-name", "zone-id", "region-name", "zone-type", "opt-in-status", "group-name",
                "network-border-group", "parent-zone-name", "parent-zone-id", "state"}


def invalid_zone(value: str) -> Reply:
    """The answer EC2 gives for a Placement.AvailabilityZone (or ZoneName) that is not one of the account's zone
    names, e.g. a zone ID. Not documented per action; observed verbatim on RunInstances (notes §AWS 1:
    newsapps/beeswithmachineguns#90): InvalidParameterValue, HTTP 400, "Invalid availability zone: [us-east-1d]"."""
    return ec2_error("InvalidParameterValue", f"Invalid availability zone: [{value}]")


def describe_availability_zones(req: QueryRequest, table: list[Zone]) -> Reply:
    """DescribeAvailabilityZones with ZoneName.N / ZoneId.N / Filter.N / AllAvailabilityZones, from the zone table."""
    names, ids = req.indexed("ZoneName"), req.indexed("ZoneId")
    for name in names:
        if not any(z.name == name for z in table):
            return invalid_zone(name)
    for zone_id in ids:
        if not any(z.zone_id == zone_id for z in table):
            return invalid_zone(zone_id)
    wanted = filters(req)
    unknown = sorted(set(wanted) - ZONE_FILTERS)
    if unknown:
        return ec2_error("InvalidParameterValue", f"The filter '{unknown[0]}' is invalid")
    everything = req.params.get("AllAvailabilityZones", "false").lower() == "true"
    chosen = []
    for zone in table:
        named = zone.name in names or zone.zone_id in ids
        if (names or ids) and not named:
            continue
        if not (everything or named or zone.launchable):
            continue
        if all(_passes(zone.field(name), values) for name, values in wanted.items()):
            chosen.append(zone)
    return ec2_response("DescribeAvailabilityZones", availabilityZoneInfo=[z.xml() for z in chosen])


def modify_availability_zone_group(req: QueryRequest, local_zones: list[LocalZone]) -> Reply:
    """Opt a Local/Wavelength Zone group in; opting out is not possible through the API (doc above)."""
    group, status = req.params.get("GroupName", ""), req.params.get("OptInStatus", "")
    if status != "opted-in":
        return ec2_error("InvalidParameterValue", f"The value '{status}' for OptInStatus is invalid; the only valid "
                         "value is opted-in")
    members = [lz for lz in local_zones if lz.group == group and lz.region == req.region]
    if not members:
        return ec2_error("InvalidParameterValue", f"The zone group '{group}' is invalid")
    for lz in members:
        lz.opted_in = True
    return ec2_response("ModifyAvailabilityZoneGroup", **{"return": True})


def region_enabled(region: str, opted_in: set[str]) -> bool:
    return region not in OPT_IN_REGIONS or region in opted_in


def region_status(region: str, opted_in: set[str]) -> str:
    if region not in OPT_IN_REGIONS:
        return "opt-in-not-required"
    return "opted-in" if region in opted_in else "not-opted-in"


def describe_regions(req: QueryRequest, view: MotoView, opted_in: set[str]) -> Reply:
    """DescribeRegions with the account's real opt-in state: plain -> enabled regions only; AllRegions -> all, with
    OptInStatus corrected (moto lists every region and mislabels three)."""
    everything = req.params.get("AllRegions", "false").lower() == "true"
    names = set(req.indexed("RegionName"))
    wanted = filters(req)
    rows = []
    for region in view.regions():
        name, endpoint = region["RegionName"], region["Endpoint"]
        status = region_status(name, opted_in)
        if names and name not in names:
            continue
        if not (everything or names) and status == "not-opted-in":
            continue
        fields = {"region-name": name, "endpoint": endpoint, "opt-in-status": status}
        if all(_passes(fields.get(f), values) for f, values in wanted.items()):
            rows.append(XmlNode({"regionName": name, "regionEndpoint": endpoint, "optInStatus": status}))
    return ec2_response("DescribeRegions", regionInfo=rows)
