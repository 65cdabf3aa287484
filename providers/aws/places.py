"""The AWS provider's answers about where this account can launch: enabled regions, zones, quota families.

A mixin of AwsProvider (kept apart so the provider module stays the launch/describe/terminate flow): the
Provider hooks `enabled_regions`, `standard_zone`, `instance_family`, `zones`, `named_zones`, and the two helpers
every launch-path call uses, `_error` (an EC2 error mapped with the region's opt-in status) and `_launch_zone` (the
zone NAME to send). The rules and their documentation are in gpuplan.providers.aws.zones and .rules.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpuplan.providers.aws.rules import Where, map_client_error, map_region_error
from gpuplan.providers.aws.spot_history import spot_price_history
from gpuplan.providers.aws.zones import instance_family, launch_zone, standard_zone
from gpuplan.providers.base import AuthError, ProviderError, SpotPricePoint

if TYPE_CHECKING:
    from gpuplan.providers.aws.zones import AccountRegions, AccountZones

log = logging.getLogger("gpuplan.providers.aws.provider")


class AccountPlaces:
    """Needs `region` (the default region, where DescribeRegions is asked), `_zones`, `_regions` and `client`."""

    region: str
    _zones: AccountZones
    _regions: AccountRegions

    def client(self, service: str, region: str, *, retries: int | None = None) -> Any:
        raise NotImplementedError  # pragma: no cover - AwsProvider.client

    def enabled_regions(self) -> frozenset[str] | None:
        """Regions not `not-opted-in` per DescribeRegions; None when that cannot be asked (then failover copes).
        Credentials EC2 refuses raise AuthError here, before anything is planned; no credentials at all (a dry run
        on a laptop) only leave the regions unknown: the launch itself then stops at its first call."""
        try:
            return self._regions.enabled()
        except Exception as exc:
            error = map_client_error(exc, region=self.region)
            if isinstance(error, AuthError) and error.code != "NoCredentials":
                raise error from exc
            log.warning("cannot tell which AWS regions are enabled (%s); trying every region", error)
            return None

    def standard_zone(self, zone: str) -> bool:
        return standard_zone(zone)

    def instance_family(self, instance_type: str | None) -> str | None:
        return instance_family(instance_type)

    def zones(self, region: str) -> list[str]:
        """The region's available Availability Zones (names; no Local Zones), in name order: failover's order."""
        try:
            return self._zones.launchable(region)
        except Exception as exc:
            raise self._error(exc, Where(region=region)) from exc

    def spot_price_history(self, region: str, zone: str | None, instance_type: str, start: dt.datetime,
                           end: dt.datetime) -> list[SpotPricePoint] | None:
        """DescribeSpotPriceHistory for the machine's zone and type (gpuplan.providers.aws.spot_history)."""
        if not zone:
            return None
        try:
            return spot_price_history(self.client("ec2", region), zone, instance_type, start, end)
        except Exception as exc:
            raise self._error(exc, Where(region=region)) from exc

    def catalog_zone(self, region: str, zone: str) -> str:
        """The zone id (use1-az6) of a zone name or id: the catalog's prices are per zone id, since zone names differ
        per account (https://docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html)."""
        try:
            found = self._zones.find(region, zone)
        except Exception as exc:
            raise self._error(exc, Where(region=region)) from exc
        return found.zone_id if found is not None else zone

    def named_zones(self, region: str, named: Sequence[str]) -> list[str]:
        """The zones of `region` the spec names (names or ids, Local Zones included), as this account names them."""
        try:
            return self._zones.named(region, named)
        except Exception as exc:
            raise self._error(exc, Where(region=region)) from exc

    def _error(self, exc: Exception, where: Where) -> ProviderError:
        """map_client_error with the region's opt-in status (rules.map_region_error)."""
        return map_region_error(exc, where, self._regions)

    def _launch_zone(self, region: str, ref: str | None, named: Sequence[str]) -> str | None:
        """The zone name to send for a zone the request names by name or id (zones.launch_zone)."""
        try:
            return launch_zone(self._zones, region, ref, named)
        except ProviderError:
            raise
        except Exception as exc:
            raise self._error(exc, Where(region=region)) from exc

