"""Zones in the catalog: which type each zone is, and which ones a launch (and ranking) uses without being told.

Zone type. EC2's DescribeAvailabilityZones reports `ZoneType`: "availability-zone | local-zone | wavelength-zone"
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_AvailabilityZone.html). The catalog has no account to
ask, so it derives the type from the zone's id, whose form AWS documents: an Availability Zone's id is "first three
letters of the Region code + the Region number + -az + number"
(https://docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html), e.g. `use1-az4`; a Local Zone's id
has one more part, the Local Zone's own location and number (`use1-atl2-az1`,
https://docs.aws.amazon.com/local-zones/latest/ug/available-local-zones.html); a Wavelength Zone's id ends in
`-wlz<n>` (`use1-wl1-bos-wlz1`, https://docs.aws.amazon.com/wavelength/latest/developerguide/available-wavelength-zones.html).
The rule, in order: `...-wlz<n>` (id) / `...-wlz-<n>` (name) -> wavelength-zone; the AZ id or AZ name form ->
availability-zone; a GCE zone (`us-central1-a`: region, digit, dash, one letter; every GCE zone is a plain zone,
https://cloud.google.com/compute/docs/regions-zones) -> availability-zone; any other zone -> local-zone. The forms
do not overlap (an AWS region has a dash before its number), so the rule needs no cloud name.
`gpuplan catalog refresh` reads ZoneType from DescribeAvailabilityZones and checks it agrees (refresh_aws).

Which zones are used unnamed. Local and Wavelength Zones must be enabled and given a subnet before a launch can use
them (https://docs.aws.amazon.com/local-zones/latest/ug/how-local-zones-work.html), so gpuplan ranks, plans and
launches into them only when asked (`prices --zones local|all`, or the spec names one in `resources.zones`). Their
spot prices are often the catalog's cheapest (Atlanta's p5.48xlarge at a fifth of us-east-1's), which is why ranking
must leave them out, not only the launch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

AVAILABILITY_ZONE = "availability-zone"
LOCAL_ZONE = "local-zone"
WAVELENGTH_ZONE = "wavelength-zone"
ZONE_TYPES = (AVAILABILITY_ZONE, LOCAL_ZONE, WAVELENGTH_ZONE)
# What `prices --zones` / Catalog.select(zones=...) accept: standard zones only (the default), only the zones used
# when named (Local and Wavelength), or both.
ZONE_CHOICES = ("standard", "local", "all")

AZ_ID_RE = re.compile(r"^[a-z]+\d+-az\d+$")
# An AZ name is the region and one letter (us-east-1a, us-gov-west-1b); a Local Zone's continues (us-east-1-atl-2a).
AZ_NAME_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+[a-z]$")
WAVELENGTH_RE = re.compile(r"-wlz-?\d+$")
GCE_ZONE_RE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")


def aws_zone_type(zone: str) -> str:
    """The ZoneType of an AWS zone id or name, from its form (see the module docstring for the rule and sources)."""
    if WAVELENGTH_RE.search(zone):
        return WAVELENGTH_ZONE
    if AZ_ID_RE.match(zone) or AZ_NAME_RE.match(zone) or GCE_ZONE_RE.match(zone):
        return AVAILABILITY_ZONE
    return LOCAL_ZONE


def zone_type(zone: str | None) -> str:
    """The zone's type; a zone-less offer (the region as a whole) and every GCP zone count as availability-zone."""
    if not zone:
        return AVAILABILITY_ZONE
    return aws_zone_type(zone)


def aws_standard_zone(zone: str) -> bool:
    """True for an AWS Availability Zone's id or name; False for a Local/Wavelength Zone (or anything else)."""
    return aws_zone_type(zone) == AVAILABILITY_ZONE


def standard_zone(zone: str) -> bool:
    """A zone a launch may use unnamed (every GCP zone; an AWS Availability Zone, not a Local Zone)."""
    return zone_type(zone) == AVAILABILITY_ZONE


def zone_wanted(zone: str | None, choice: str) -> bool:
    """Does `--zones choice` (standard | local | all) keep this zone?"""
    if choice == "all":
        return True
    standard = zone_type(zone) == AVAILABILITY_ZONE
    return standard if choice == "standard" else not standard


def zone_of_region(zone_name: str, region: str | None) -> bool:
    """`us-east-1a` and `us-east-1-atl-2a` are zone names of us-east-1 (zone names start with their region)."""
    if not region or not zone_name.startswith(region) or len(zone_name) == len(region):
        return False
    rest = zone_name[len(region):]
    return rest[0] == "-" or (len(rest) == 1 and rest.isalpha())


def keep_offer(region: str | None, zone: str | None, *, standard: Callable[[str], bool],
               enabled: frozenset[str] | None = None, named: Sequence[str] = ()) -> bool:
    """Whether planning may pick an offer in (region, zone): the region is enabled (None: unknown, every region);
    with named zones (names or ids) only those zones, a named id matching the catalog's zone, a named name its
    region's standard zones (the catalog knows ids only; the launch resolves names); else standard zones only."""
    if region is not None and enabled is not None and region not in enabled:
        return False
    if named:
        if zone in named:
            return True
        if not any(zone_of_region(n, region) for n in named):
            return False
    return zone is None or standard(zone)
