"""The layer's own state: which regions and zone groups the account enabled, remembered client tokens, placement
groups, queued errors. Everything here is per layer and emptied by `reset()` between tests."""

from __future__ import annotations

from dataclasses import dataclass, field

# Regions launched after 2019-03-20 are disabled until the account enables them
# (https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-regions.html: "Opt-in Regions – Regions launched
# after March 20, 2019 are disabled by default"). The set below is that rule applied to the region list (the official
# per-region table is https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html). moto 5.x marks
# af-south-1, ap-southeast-3 and eu-south-1 `opt-in-not-required`, which they are not.
OPT_IN_REGIONS = frozenset({
    "af-south-1", "ap-east-1", "ap-east-2", "ap-south-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5",
    "ap-southeast-6", "ap-southeast-7", "ca-west-1", "eu-central-2", "eu-south-1", "eu-south-2", "il-central-1",
    "me-central-1", "me-south-1", "mx-central-1",
})


@dataclass
class LocalZone:
    """A Local Zone or Wavelength Zone (moto models none). `ZoneType`, `OptInStatus`, `GroupName`, `ParentZoneName`
    as in https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_AvailabilityZone.html."""

    name: str
    zone_id: str
    region: str
    group: str
    parent_zone_name: str
    parent_zone_id: str
    zone_type: str = "local-zone"
    opted_in: bool = False

    @property
    def opt_in_status(self) -> str:
        return "opted-in" if self.opted_in else "not-opted-in"


def default_local_zones() -> list[LocalZone]:
    """An Atlanta Local Zone and a Boston Wavelength Zone in us-east-1 (real names and IDs; moto's us-east-1a is
    use1-az6), both not opted in, as on a new account."""
    return [
        LocalZone("us-east-1-atl-2a", "use1-atl2-az1", "us-east-1", "us-east-1-atl-2", "us-east-1a", "use1-az6"),
        LocalZone("us-east-1-wl1-bos-wlz-1", "use1-wl1-bos-wlz1", "us-east-1", "us-east-1-wl1", "us-east-1a",
                  "use1-az6", zone_type="wavelength-zone"),
    ]


@dataclass
class Injection:
    """An error RunInstances answers instead of launching, for requests matching every field that is set.

    `zone` matches the zone name or ID the request resolves to (Placement.AvailabilityZone/AvailabilityZoneId or the
    subnet's zone); `market` is "spot" or "on-demand" (InstanceMarketOptions.MarketType); `times` is how many matching
    requests fail (None: every one). botocore retries 5xx answers (InsufficientInstanceCapacity is a 500), and each
    retry is a request: a client with default retries consumes up to 5 injections per call.
    """

    code: str
    message: str
    status: int
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    market: str | None = None
    times: int | None = 1
    hits: int = 0

    def matches(self, region: str, zone_names: tuple[str, ...], instance_type: str, market: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return ((self.region is None or self.region == region)
                and (self.zone is None or self.zone in zone_names)
                and (self.instance_type is None or self.instance_type == instance_type)
                and (self.market is None or self.market == market))


@dataclass
class Launch:
    """What one successful RunInstances with a client token returned, remembered for idempotent retries."""

    params: dict[str, str]
    status: int
    body: bytes
    instance_ids: list[str]


@dataclass
class PlacementGroup:
    name: str
    group_id: str
    strategy: str
    region: str
    tags: list[tuple[str, str]] = field(default_factory=list)
    partition_count: int | None = None
    spread_level: str | None = None
    zone: str | None = None
    instance_ids: list[str] = field(default_factory=list)


@dataclass
class Recorded:
    """One request the layer saw (for tests to assert on): service, action (EC2/Query) or target, region, params."""

    service: str
    action: str
    region: str
    params: dict[str, str]
    status: int = 0
