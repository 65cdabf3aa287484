"""The catalog the planner and `gpuplan prices` hold: every offer parsed once, newest source per cloud.

No global state: a Catalog is a value the caller keeps for as long as it wants the same prices (the planner
loads one and iterates it for every candidate; each CLI invocation loads its own).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType

from gpuplan.catalog.gcp_markets import sold_markets
from gpuplan.catalog.gpu_names import resolve_gpu_name
from gpuplan.catalog.offer import Offer
from gpuplan.catalog.snapshot import load_shipped, shipped_clouds
from gpuplan.catalog.stored import read_newest
from gpuplan.catalog.zones import ZONE_CHOICES, zone_wanted
from gpuplan.errors import UserError

STALE_AFTER = dt.timedelta(days=7)


@dataclass(frozen=True)
class CatalogSource:
    """Where one cloud's offers come from: the shipped snapshot or a stored refresh."""

    cloud: str
    source: str
    fetched_at: dt.datetime
    offer_count: int
    snapshot_id: int | None = None  # None: the snapshot shipped in the package

    @property
    def shipped(self) -> bool:
        return self.snapshot_id is None

    def age(self, now: dt.datetime | None = None) -> dt.timedelta:
        return (now or dt.datetime.now(dt.timezone.utc)) - self.fetched_at

    def is_stale(self, now: dt.datetime | None = None) -> bool:
        return self.age(now) > STALE_AFTER


class Catalog:
    """Offers of the chosen clouds, each cloud from its newest source (a stored refresh, else the shipped file)."""

    __slots__ = ("_by_gpu", "offers", "sources")

    def __init__(self, offers: Iterable[Offer], sources: dict[str, CatalogSource]) -> None:
        self.offers: tuple[Offer, ...] = tuple(offers)
        self.sources = MappingProxyType(dict(sources))
        by_gpu: dict[str, list[Offer]] = {}
        for offer in self.offers:
            by_gpu.setdefault(offer.gpu, []).append(offer)
        self._by_gpu = MappingProxyType({gpu: tuple(group) for gpu, group in by_gpu.items()})

    @classmethod
    def load(cls, db_url: str | None = None, clouds: Collection[str] | None = None) -> Catalog:
        """Load the newest offers per cloud: a complete stored refresh if it is newer than the shipped snapshot.

        `clouds`: the clouds to load, in order (the callers above the providers pass the registry's
        `catalog_clouds()`); None: every cloud the package ships prices for. A cloud with neither shipped nor
        stored prices loads with no offers."""
        shipped = shipped_clouds()
        wanted = tuple(dict.fromkeys(clouds)) if clouds is not None else tuple(shipped)
        epoch = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
        stored = {
            cloud: entry for cloud, entry in read_newest(db_url, wanted).items()
            if cloud not in shipped or entry[0].fetched_at >= shipped[cloud].fetched_at
        }
        from_files = frozenset(c for c in wanted if c not in stored and c in shipped)
        shipped_offers = load_shipped(from_files, shipped=shipped) if from_files else []
        offers: list[Offer] = []
        sources: dict[str, CatalogSource] = {}
        for cloud in wanted:
            if cloud in stored:
                snap, cloud_offers = stored[cloud]
                sources[cloud] = CatalogSource(cloud, snap.source, snap.fetched_at, len(cloud_offers), snap.id)
            elif cloud in shipped:
                cloud_offers = [o for o in shipped_offers if o.cloud == cloud]
                info = shipped[cloud]
                sources[cloud] = CatalogSource(cloud, info.source, info.fetched_at, len(cloud_offers))
            else:
                cloud_offers = []
                sources[cloud] = CatalogSource(cloud, "no prices yet: run `gpuplan catalog refresh --cloud "
                                               f"{cloud}`", epoch, 0)
            # A GCP shape Google does not sell on demand loses its on-demand price (gpuplan.catalog.gcp_markets).
            offers.extend(sold_markets(o) for o in cloud_offers)
        return cls(offers, sources)

    def gpus(self) -> frozenset[str]:
        return frozenset(self._by_gpu)

    def check_regions(self, patterns: Collection[str] | None, what: str = "--region") -> None:
        """A UserError naming the first pattern that matches no region of this catalog: a typo (`us-est-*`)
        would otherwise filter every offer out and read as "nothing fits" or "no offers match"."""
        regions = {offer.region for offer in self.offers}
        for pattern in patterns or ():
            if not fnmatch.filter(regions, pattern):
                raise UserError(f"{what}: {pattern!r} matches no region of {', '.join(self.sources) or 'any cloud'} "
                                "in the price catalog (see `gpuplan prices`)")

    def select(
        self,
        *,
        gpus: Collection[str] | None = None,
        clouds: Collection[str] | None = None,
        spot: bool | None = None,
        min_gpus: float | None = None,
        min_gpu_memory_gb: float | None = None,
        regions: Collection[str] | None = None,
        max_price: Decimal | float | None = None,
        zones: str = "standard",
    ) -> list[Offer]:
        """Offers matching every given filter (None = no filter).

        spot=True keeps offers with a spot price, spot=False those with an on-demand price; max_price applies
        to that price (on-demand when spot is None). `regions` are glob patterns (`us-*`). `min_gpu_memory_gb`
        is per GPU (GB as the vendor states it). `gpus` may be any spelling the one resolver takes
        (gpuplan.catalog.gpu_names.resolve_gpu_name: `A100` is the 40 GB part everywhere). `zones`: "standard"
        (Availability Zones only: what ranking and a launch use unasked), "local" (only Local/Wavelength Zones) or
        "all" (callers that filter named zones themselves, gpuplan.catalog.zones.keep_offer).
        """
        if zones not in ZONE_CHOICES:
            raise ValueError(f"zones must be one of {ZONE_CHOICES}, not {zones!r}")
        if gpus is not None:
            names = {resolve_gpu_name(g) for g in gpus}
            pool: Iterable[Offer] = [o for gpu in sorted(names) for o in self._by_gpu.get(gpu, ())]
        else:
            pool = self.offers
        cloud_set = set(clouds) if clouds is not None else None
        limit = None if max_price is None else Decimal(str(max_price))
        out = []
        for offer in pool:
            if cloud_set is not None and offer.cloud not in cloud_set:
                continue
            if not zone_wanted(offer.zone, zones):
                continue
            price = offer.price(bool(spot))
            if spot is not None and price is None:
                continue
            if limit is not None and (price is None or price > limit):
                continue
            if min_gpus is not None and offer.gpu_count < min_gpus:
                continue
            if min_gpu_memory_gb is not None and (offer.gpu_memory_gb or 0) < min_gpu_memory_gb:
                continue
            if regions is not None and not any(fnmatch.fnmatchcase(offer.region, p) for p in regions):
                continue
            out.append(offer)
        return out


def load_offers(
    clouds: Collection[str] | None = None,
    gpus: Collection[str] | None = None,
    spot: bool | None = None,
    *,
    db_url: str | None = None,
    catalog: Catalog | None = None,
    **filters: object,
) -> list[Offer]:
    """The newest offers per cloud, filtered (see Catalog.select); pass `catalog` to reuse a loaded one."""
    catalog = catalog or Catalog.load(db_url, clouds)
    return catalog.select(gpus=gpus, clouds=clouds, spot=spot, **filters)  # type: ignore[arg-type]
