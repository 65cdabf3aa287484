"""What a provider's price API returns (`RefreshesPrices.refresh_prices`): the offers, with where they came from."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuplan.catalog.offer import Offer


@dataclass(frozen=True)
class PriceRefresh:
    """One refresh's offers, the source the snapshot records (`aws: pricing API + spot price history`), and
    human notes (skipped types, zone oddities) for stderr."""

    offers: list[Offer]
    source: str
    notes: list[str] = field(default_factory=list)
