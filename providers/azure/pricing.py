"""Azure's price capability: `gpuplan catalog refresh --cloud azure` from the public Retail Prices API (no account
needed, spot included), turned into catalog offers with the VM sizes' GPUs (providers/azure/vm_sizes.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from gpuplan.catalog.price_refresh import PriceRefresh
from gpuplan.providers.base import RefreshesPrices


class AzurePricing(RefreshesPrices):
    """Mixed into AzureProvider: prices need no credentials, so this is the whole refresh."""

    def refresh_prices(self, regions: Sequence[str] | None, now: dt.datetime) -> PriceRefresh:
        raise NotImplementedError("azure price refresh: not yet")
