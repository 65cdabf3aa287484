"""The GPU price catalog: offers from the shipped snapshot and from live refreshes, in one schema.

Importing this package is cheap (stdlib only): `gpuplan prices` must answer in well under 300 ms, so
SQLAlchemy, boto3 and the Google clients are imported only by the refresh code and the non-SQLite DB reader.

The planner holds a `Catalog` (parsed once) and filters it as often as it likes:

    catalog = Catalog.load(db_url)
    for offer in catalog.select(gpus={"H100"}, spot=False): ...

`load_offers(...)` is the one-call shorthand.
"""

from __future__ import annotations

from gpuplan.catalog.catalog import Catalog, CatalogSource, load_offers
from gpuplan.catalog.gpu_names import CANONICAL_GPUS
from gpuplan.catalog.offer import Offer

__all__ = ["CANONICAL_GPUS", "Catalog", "CatalogSource", "Offer", "load_offers"]
