"""Which catalog offers a launch may use on this account: enabled regions, zones used only when named, and
instance types the configured machine image runs on (`usable_instance_type`), and architectures the job's container
image is published for (gpuplan.launching.image_arch).

Planning must not pick an offer the account cannot launch: a region it has not enabled (AWS opt-in regions,
https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-regions.html: "Regions launched after March 20,
2019 are disabled by default"), or a zone the provider uses only when the spec names it (AWS Local Zones and
Wavelength Zones, which need their own opt-in and subnet:
https://docs.aws.amazon.com/local-zones/latest/ug/how-local-zones-work.html). Both answers come from the provider
(`enabled_regions`, `standard_zone`), so nothing here compares cloud names.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from gpuplan.catalog.zones import keep_offer
from gpuplan.providers.base import Provider


@dataclass(frozen=True)
class UsableOffers:
    """The filter: `enabled` None means unknown (every region); `named` are the spec's `resources.zones`."""

    provider: Provider
    enabled: frozenset[str] | None
    named: tuple[str, ...] = ()
    # The catalog architectures the job's image runs on (gpuplan.launching.image_arch); None: any.
    archs: frozenset[str] | None = None

    def keep(self, region: str | None, zone: str | None, instance_type: str | None = None,
             arch: str | None = None) -> bool:
        return (keep_offer(region, zone, standard=self.provider.standard_zone, enabled=self.enabled,
                           named=self.named)
                and (self.archs is None or arch is None or arch in self.archs)
                and self.provider.usable_instance_type(instance_type))


def usable_offers(provider: Provider, named_zones: Sequence[str] = (),
                  archs: Collection[str] | None = None) -> UsableOffers:
    """The filter for this provider's account (asks it which regions are enabled: one call, cached by it);
    `archs`: the catalog architectures the job's image has (None: any)."""
    return UsableOffers(provider, provider.enabled_regions(), tuple(named_zones),
                        frozenset(archs) if archs is not None else None)
