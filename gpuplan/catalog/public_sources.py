"""A refresh from the prices a cloud publishes for anyone (no account), with the provenance of what it lacks.

The provider says what its public source is and what needs an account (gpuplan.providers.base.PublishesPrices:
AWS's Price List bulk files, GCP's Billing Catalog with an API key). What the public source lacks is taken from
the previous snapshot of that cloud (a stored refresh, else the shipped one), which this names as the `origin` the
snapshot's source records.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gpuplan.catalog.offer import Offer
    from gpuplan.catalog.price_refresh import PriceRefresh
    from gpuplan.store.db import Store


class PublicPriceProvider(Protocol):
    """What this needs of a provider with gpuplan.providers.base.PublishesPrices (the catalog sits below the
    providers, so it names the method, not the class)."""

    def refresh_public_prices(self, regions: Sequence[str] | None, now: dt.datetime, previous: Sequence[Offer],
                              origin: str, progress: Callable[[str], None] | None = None) -> PriceRefresh: ...


class PublicPrices:
    """A price source (gpuplan.catalog.refresh.PriceSource) reading `provider`'s public prices."""

    def __init__(self, provider: PublicPriceProvider, cloud: str, store: Store,
                 progress: Callable[[str], None] | None = None) -> None:
        self.provider = provider
        self.cloud = cloud
        self.store = store
        self.progress = progress

    def refresh_prices(self, regions: Sequence[str] | None, now: dt.datetime) -> PriceRefresh:
        from gpuplan.catalog.catalog import Catalog

        previous = Catalog.load(self.store.url, (self.cloud,))
        before = previous.sources[self.cloud]
        origin = (f"snapshot #{before.snapshot_id} ({before.source}, {before.fetched_at:%Y-%m-%d})"
                  if before.snapshot_id is not None else f"the shipped snapshot ({before.fetched_at:%Y-%m-%d})")
        return self.provider.refresh_public_prices(regions, now, previous.offers, origin, self.progress)
