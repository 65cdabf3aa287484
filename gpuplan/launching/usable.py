"""Which catalog offers a launch may use on this account: enabled regions, and zones used only when named.

Planning must not pick an offer the account cannot launch: a region it has not enabled (AWS opt-in regions,
https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-regions.html: "Regions launched after March 20,
2019 are disabled by default"), or a zone the provider uses only when the spec names it (AWS Local Zones and
Wavelength Zones, which need their own opt-in and subnet:
https://docs.aws.amazon.com/local-zones/latest/ug/how-local-zones-work.html). Both answers come from the provider
(`enabled_regions`, `standard_zone`), so nothing here compares cloud names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuplan.providers.base import Provider


@dataclass(frozen=True)
class UsableOffers:
    """The filter: `enabled` None means unknown (every region); `named` are the spec's `resources.zones`."""

    provider: Provider
    enabled: frozenset[str] | None
    named: tuple[str, ...] = ()

    def keep(self, region: str | None, zone: str | None) -> bool:
        if region is not None and self.enabled is not None and region not in self.enabled:
            return False
        if self.named:
            # Named zones (names or ids) restrict the launch to them: an offer in a named zone id, or in the
            # region of a named zone name (the catalog knows ids only; the provider resolves names at launch).
            if zone in self.named:
                return True
            if not any(_zone_of_region(n, region) for n in self.named):
                return False
        return zone is None or self.provider.standard_zone(zone)


def _zone_of_region(zone_name: str, region: str | None) -> bool:
    """`us-east-1a` and `us-east-1-atl-2a` are zones of us-east-1 (zone names start with their region)."""
    if not region or not zone_name.startswith(region) or len(zone_name) == len(region):
        return False
    rest = zone_name[len(region):]
    return rest[0] == "-" or (len(rest) == 1 and rest.isalpha())


def usable_offers(provider: Provider, named_zones: Sequence[str] = ()) -> UsableOffers:
    """The filter for this provider's account (asks it which regions are enabled: one call, cached by it)."""
    return UsableOffers(provider, provider.enabled_regions(), tuple(named_zones))
