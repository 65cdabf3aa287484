"""Which clouds publish prices anyone may read, and how a refresh from them keeps its provenance.

| cloud | public source | what still needs an account |
| --- | --- | --- |
| aws | Price List Bulk API files (on-demand) | zones, spot prices (kept from the previous snapshot) |
| gcp | Cloud Billing Catalog API with an API key (GPUPLAN_GCP_API_KEY); not done here yet | — |

The snapshot's `source` names the public file and the snapshot the account-only parts came from.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gpuplan.errors import UserError

if TYPE_CHECKING:
    from gpuplan.catalog.offer import Offer
    from gpuplan.store.db import Store

PUBLIC_CLOUDS = ("aws",)
ACCOUNT_ONLY = {
    "gcp": "GCP's Billing Catalog needs an API key or credentials, and its machine types a project: run "
           "`gcloud auth application-default login` and pass --project",
}


def has_api_credentials(cloud: str) -> bool:
    """Whether the cloud's SDK finds credentials here (no network call). A cloud without public price files
    counts as having them: its API is tried and says what is missing."""
    if cloud != "aws":
        return True
    import boto3  # botocore's credential chain, as every AWS call uses (env, profile, SSO, instance role)

    return boto3.Session().get_credentials() is not None


def fetch_public(store: Store, cloud: str, regions: Sequence[str] | None, now: dt.datetime,
                 progress: Callable[[str], None] | None = None) -> tuple[list[Offer], list[str], str]:
    """(offers, notes, source) from `cloud`'s public price files."""
    if cloud not in PUBLIC_CLOUDS:
        raise UserError(f"{cloud} has no public price files gpuplan reads: {ACCOUNT_ONLY.get(cloud, '')}")
    from gpuplan.catalog.catalog import Catalog
    from gpuplan.catalog.refresh_aws_public import SOURCE, fetch_public_offers

    previous = Catalog.load(store.url, (cloud,))
    before = previous.sources[cloud]
    origin = (f"snapshot #{before.snapshot_id} ({before.source}, {before.fetched_at:%Y-%m-%d})"
              if before.snapshot_id is not None else f"the shipped snapshot ({before.fetched_at:%Y-%m-%d})")
    fetched = fetch_public_offers(regions, now, previous.offers, origin, progress=progress)
    source = f"{SOURCE}; zones and spot from {origin}"
    return fetched.offers, fetched.notes, source
