"""Which catalog zones a launch uses without being told: the rule `gpuplan plan` and a launch share.

AWS catalogs name zones by AZ id. An Availability Zone's id is "first three letters of the Region code + the
Region number + -az + number" (https://docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html), e.g.
use1-az4; a Local Zone's id has one more part (use1-atl2-az1), a Wavelength Zone's too (use1-wl1-bos-wlz1). Local
and Wavelength Zones must be enabled and given a subnet before a launch can use them
(https://docs.aws.amazon.com/local-zones/latest/ug/how-local-zones-work.html), so gpuplan plans and launches into
them only when the spec names them (`resources.zones`). Their prices are often the catalog's cheapest (a Local
Zone's spot price), which is why planning must leave them out, not only the launch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

AZ_ID_RE = re.compile(r"^[a-z]+\d+-az\d+$")
# An AZ name is the region and one letter (us-east-1a, us-gov-west-1b); a Local Zone's continues (us-east-1-atl-2a).
AZ_NAME_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+[a-z]$")


def aws_standard_zone(zone: str) -> bool:
    """True for an AWS Availability Zone's id or name; False for a Local/Wavelength Zone (or anything else)."""
    return bool(AZ_ID_RE.match(zone) or AZ_NAME_RE.match(zone))


def standard_zone(cloud: str, zone: str) -> bool:
    """A zone of `cloud` a launch may use unnamed (every GCP zone; an AWS Availability Zone, not a Local Zone)."""
    return aws_standard_zone(zone) if cloud == "aws" else True


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
