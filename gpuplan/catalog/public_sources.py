"""Which clouds publish prices anyone may read, and how a refresh from them keeps its provenance.

- aws: the Price List Bulk API files (on-demand). Zones and spot prices need an account: kept from the previous
  snapshot.
- gcp: the Cloud Billing Catalog API with an API key (GPUPLAN_GCP_API_KEY): on-demand and spot unit prices.
  Machine types and zones need credentials and a project: the previous snapshot's, priced anew.

The snapshot's `source` names the public file and the snapshot the account-only parts came from.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplan.errors import UserError

if TYPE_CHECKING:
    from gpuplan.catalog.offer import Offer
    from gpuplan.store.db import Store

PUBLIC_CLOUDS = ("aws", "gcp")
NEEDS = {
    "gcp": "GCP's Billing Catalog needs an API key (set GPUPLAN_GCP_API_KEY) or credentials, and its machine types "
           "a project: run `gcloud auth application-default login` and pass --project",
}


def has_api_credentials(cloud: str) -> bool:
    """Whether the cloud's SDK finds credentials here (no network call). A cloud without public price files
    counts as having them: its API is tried and says what is missing."""
    if cloud == "gcp":  # Application Default Credentials from a file (the metadata server is not asked here)
        adc = Path(os.environ.get("CLOUDSDK_CONFIG") or Path.home() / ".config" / "gcloud")
        return bool(os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")) or \
            (adc / "application_default_credentials.json").exists() or not os.environ.get("GPUPLAN_GCP_API_KEY")
    if cloud != "aws":
        return True
    import boto3  # botocore's credential chain, as every AWS call uses (env, profile, SSO, instance role)

    return boto3.Session().get_credentials() is not None


def fetch_public(store: Store, cloud: str, regions: Sequence[str] | None, now: dt.datetime,
                 progress: Callable[[str], None] | None = None) -> tuple[list[Offer], list[str], str]:
    """(offers, notes, source) from `cloud`'s public price files."""
    if cloud not in PUBLIC_CLOUDS:
        raise UserError(f"{cloud} has no public price source gpuplan reads")
    from gpuplan.catalog.catalog import Catalog

    previous = Catalog.load(store.url, (cloud,))
    before = previous.sources[cloud]
    origin = (f"snapshot #{before.snapshot_id} ({before.source}, {before.fetched_at:%Y-%m-%d})"
              if before.snapshot_id is not None else f"the shipped snapshot ({before.fetched_at:%Y-%m-%d})")
    if cloud == "gcp":
        from gpuplan.catalog import refresh_gcp_key

        key = refresh_gcp_key.api_key()
        if key is None:
            raise UserError(f"no public gcp prices without an API key: {NEEDS['gcp']}")
        offers, notes = refresh_gcp_key.fetch_with_key(key, regions, now, previous.offers)
        return offers, notes, f"{refresh_gcp_key.SOURCE}; machine types from {origin}"
    from gpuplan.catalog.refresh_aws_public import SOURCE, fetch_public_offers

    fetched = fetch_public_offers(regions, now, previous.offers, origin, progress=progress)
    return fetched.offers, fetched.notes, f"{SOURCE}; zones and spot from {origin}"
