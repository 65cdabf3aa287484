"""Spot as billed: when a spot run settles, each ended spot machine is re-priced at what the cloud charged.

The launch records the spot price quoted for the machine's zone at launch time; the cloud bills the price in
effect each second, which moves. At settle, every spot machine that has ended and was not billed yet gets:
- AWS: the integral of DescribeSpotPriceHistory for its zone and type over [launched_at, terminated_at], starting
  from the price in effect at launch (Provider.spot_price_history; gpuplan.providers.aws.spot_history);
- GCP: the region's spot price (Spot VM prices are per region and "can change up to once every 30 days",
  https://cloud.google.com/compute/docs/instances/spot#pricing; there is no history API), from the newest price
  catalog (a `gpuplan catalog refresh`, else the shipped snapshot), constant over the span;
- anything else (local, Slurm, a history that returns nothing): the quoted price stands.
The instance row then carries the average billed price (so every cost, budget and report derived from the rows
is the billed one) and a `spot_billed` event keeps both figures: the quoted price and cost, the billed price and
cost, and where the billed one came from. `gpuplan report --quoted` lists them.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuplan.providers.base import Provider, ProviderError, SpotPricePoint
from gpuplan.runs.cost import instance_cost
from gpuplan.runs.events import EventKind, payload, record_event
from gpuplan.runs.payloads import SpotBilledData
from gpuplan.runs.spot_billing import integrate
from gpuplan.store.models import Event, InstanceRow, Run

log = logging.getLogger(__name__)


def billed_instance_ids(session: Session, run: Run) -> set[str]:
    """Machines of the run already billed from a history (a settle seen twice bills nothing twice). Asked of the
    session, not `run.events`, so an event this session added is seen too."""
    done: set[str] = set()
    query = select(Event).where(Event.run_id == run.id, Event.kind == EventKind.SPOT_BILLED)
    for event in session.scalars(query):
        data = payload(event, SpotBilledData)
        if data is not None and data.instance:
            done.add(data.instance)
    return done


def history_for(row: InstanceRow, provider: Provider | None,
                catalog_price: Any) -> tuple[list[SpotPricePoint], str] | None:
    """The price points for one machine and their source; None when nobody can say."""
    assert row.terminated_at is not None and row.instance_type and row.region
    if provider is not None:
        points = provider.spot_price_history(row.region, row.zone, row.instance_type, row.launched_at,
                                             row.terminated_at)
        if points:
            return points, provider.spot_price_source()
    if _spot_priced_by_catalog(row, provider):
        found = catalog_price(row)
        if found is not None:
            price, source = found
            return [SpotPricePoint(row.launched_at, price)], source
    return None


def _spot_priced_by_catalog(row: InstanceRow, provider: Provider | None) -> bool:
    """Is a spot machine of this row's provider billed at the catalog's spot price (`spot_priced_by_catalog`)?
    Asked of the provider's class when no provider was built (a settle from the books alone)."""
    if provider is not None:
        return provider.spot_priced_by_catalog
    from gpuplan.providers.base import ProviderError
    from gpuplan.providers.registry import load_provider_class

    try:
        return load_provider_class(row.provider).spot_priced_by_catalog
    except ProviderError:
        return False


def bill_spot(session: Session, run: Run, provider: Provider | None, *,
              catalog_price: Any = None) -> list[SpotBilledData]:
    """Re-price the run's ended, not yet billed spot machines (see the module doc); returns the events' data.

    `catalog_price(row) -> (price, source) | None` answers for GCP (default: the newest catalog).
    """
    lookup = catalog_price or CatalogSpotPrices(session)
    done = billed_instance_ids(session, run)
    out: list[SpotBilledData] = []
    for row in run.instances:
        if not row.spot or row.terminated_at is None or row.provider_instance_id in done:
            continue
        if not row.instance_type or not row.region:
            continue
        try:
            found = history_for(row, provider, lookup)
        except ProviderError as exc:
            log.warning("spot price history for %s: %s (the quoted price stands for now)", row.provider_instance_id,
                        exc)
            continue
        if found is None:
            continue
        points, source = found
        bill = integrate(points, row.launched_at, row.terminated_at, row.min_billed_seconds)
        if bill is None:
            continue
        quoted_price = Decimal(row.price_per_hour)
        quoted_cost = instance_cost(row, row.terminated_at)
        row.price_per_hour = bill.average_price_per_hour
        data = SpotBilledData(instance=row.provider_instance_id, zone=row.zone, instance_type=row.instance_type,
                              quoted_price_per_hour=quoted_price, billed_price_per_hour=bill.average_price_per_hour,
                              quoted_cost_usd=quoted_cost, billed_cost_usd=bill.cost, billed_seconds=bill.seconds,
                              price_steps=bill.steps, source=source, history_starts_late=bill.history_starts_late)
        record_event(session, run, EventKind.SPOT_BILLED,
                     f"{row.provider_instance_id}: billed ${bill.cost} at the spot prices of {row.zone or row.region} "
                     f"(quoted ${quoted_cost})", data)
        out.append(data)
    return out


class CatalogSpotPrices:
    """The region's spot price from the newest catalog of the session's database, loaded once when first asked."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._catalog: Any = None

    def __call__(self, row: InstanceRow) -> tuple[Decimal, str] | None:
        if self._catalog is None:
            from gpuplan.catalog import Catalog

            url = self._session.get_bind().engine.url.render_as_string(hide_password=False)
            self._catalog = Catalog.load(url, (row.cloud,))
        prices = [o for o in self._catalog.offers
                  if o.cloud == row.cloud and o.region == row.region and o.instance_type == row.instance_type
                  and o.spot_price_per_hour is not None and (not row.gpu or o.gpu == row.gpu)
                  and (not row.gpu_count or o.gpu_count == row.gpu_count)]
        if not prices:
            return None
        best = max(prices, key=lambda o: o.spot_price_per_hour)  # one price per region; the dearest if they differ
        return best.spot_price_per_hour, f"{row.cloud}: region spot price ({best.source}, {best.fetched_at:%Y-%m-%d})"
