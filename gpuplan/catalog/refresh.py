"""`gpuplan catalog refresh`: fetch one cloud's live prices, then store them as one complete snapshot.

Everything is fetched before anything is written, and the snapshot is written in one transaction and marked
complete last (gpuplan.catalog.stored.save_snapshot): a refresh that fails halfway, or returns nothing, leaves
the previous prices in force.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from gpuplan.catalog.stored import save_snapshot
from gpuplan.errors import GpuplanError

if TYPE_CHECKING:
    from gpuplan.catalog.price_refresh import PriceRefresh
    from gpuplan.store.db import Store


class RefreshError(GpuplanError):
    """A refresh could not complete; the message says the previous prices are kept."""


@dataclass
class RefreshReport:
    cloud: str
    snapshot_id: int
    offer_count: int
    regions: list[str]
    gpus: list[str]
    source: str
    fetched_at: dt.datetime
    seconds: float
    notes: list[str] = field(default_factory=list)


class PriceSource(Protocol):
    """Who fetches a cloud's live prices: a provider with the `RefreshesPrices` capability (providers/base.py)."""

    @property
    def cloud(self) -> str: ...

    def refresh_prices(self, regions: Sequence[str] | None, now: dt.datetime) -> PriceRefresh: ...


def refresh(store: Store, source: PriceSource, regions: Sequence[str] | None = None, *,
            now: dt.datetime | None = None) -> RefreshReport:
    """Fetch `source`'s offers (optionally only `regions`) and store them; raise RefreshError on any failure."""
    started = time.monotonic()
    now = now or dt.datetime.now(dt.timezone.utc)
    cloud = source.cloud
    try:
        fetched = source.refresh_prices(regions, now)
    except GpuplanError:
        raise
    except Exception as exc:
        raise RefreshError(f"{cloud} price refresh failed ({type(exc).__name__}: {_one_line(exc)}); "
                           "the previous prices are kept") from exc
    offers, notes, source_text = fetched.offers, list(fetched.notes), fetched.source
    if not offers:
        where = f" in {', '.join(regions)}" if regions else ""
        raise RefreshError(f"{cloud} price refresh found no GPU offers{where}; the previous prices are kept")
    if regions:
        source_text = f"{source_text} regions={','.join(sorted(regions))}"
    stored = save_snapshot(store, cloud, source_text, offers, now)
    return RefreshReport(
        cloud=cloud, snapshot_id=stored.id, offer_count=stored.offer_count,
        regions=sorted({o.region for o in offers}), gpus=sorted({o.gpu for o in offers}), source=stored.source,
        fetched_at=now, seconds=round(time.monotonic() - started, 3), notes=notes,
    )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
