"""GCP GPU prices with an API key only: the Cloud Billing Catalog, priced onto the machines gpuplan already knows.

The Catalog API's `services.skus.list` accepts an API key instead of OAuth credentials
(https://cloud.google.com/billing/docs/how-to/get-pricing-information-api: "you need an API key"), so the unit
prices (GPU, core, RAM per region, on-demand and spot: the `Preemptible` usage type) need no account beyond the
key (GPUPLAN_GCP_API_KEY). Which machine types and GPUs each zone has needs Compute Engine's machineTypes and
acceleratorTypes, which take OAuth credentials and a project: those come from the previous snapshot (stored or
shipped), and each of its offers is priced again from the new unit prices (gpuplan.catalog.refresh_gcp's rule:
vCPUs x core + GiB x RAM + GPUs x GPU). The snapshot's source says both.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from typing import Any

from gpuplan.catalog.gcp_clients import BILLING_OVERRIDE, endpoint_root
from gpuplan.catalog.gpu_names import GCP_ACCELERATOR_GPU, GCP_N1_ACCELERATORS
from gpuplan.catalog.offer import Offer
from gpuplan.catalog.refresh_gcp import COMPUTE_ENGINE_SERVICE, MachineType, _offer, parse_skus

KEY_VARIABLE = "GPUPLAN_GCP_API_KEY"
SOURCE = "gcp: billing catalog with an API key"


def api_key() -> str | None:
    return os.environ.get(KEY_VARIABLE) or None


def catalog_client_kwargs(key: str) -> dict[str, Any]:
    """REST transport with the API key (no credentials: the key is the only authentication)."""
    options: dict[str, Any] = {"api_key": key}
    endpoint = endpoint_root(os.environ.get(BILLING_OVERRIDE))
    if endpoint is not None:
        options["api_endpoint"] = endpoint
    return {"transport": "rest", "client_options": options}


def _accelerator(offer: Offer) -> str | None:
    """The accelerator type of a known offer: attached to an n1 host, or built into its machine series."""
    if offer.instance_type.startswith("n1-"):
        return next((a for a in sorted(GCP_N1_ACCELERATORS) if GCP_ACCELERATOR_GPU[a] == offer.gpu), None)
    built_in = [a for a, gpu in GCP_ACCELERATOR_GPU.items() if gpu == offer.gpu and a not in GCP_N1_ACCELERATORS]
    mega = [a for a in built_in if "mega" in a]
    if "megagpu" in offer.instance_type and mega:
        return mega[0]
    plain = [a for a in built_in if "mega" not in a]
    return plain[0] if plain else None


def fetch_with_key(key: str, regions: Sequence[str] | None, now: dt.datetime,
                   previous: Sequence[Offer]) -> tuple[list[Offer], list[str]]:
    """(offers, notes): `previous`'s machines at the catalog's current unit prices."""
    from google.cloud import billing_v1

    client = billing_v1.CloudCatalogClient(**catalog_client_kwargs(key))
    prices = parse_skus(client.list_skus(parent=COMPUTE_ENGINE_SERVICE))
    if not prices.by_region:
        raise RuntimeError("the Cloud Billing catalog returned no Compute Engine GPU/core/RAM prices")
    offers: list[Offer] = []
    unpriced = 0
    for known in previous:
        if (regions and known.region not in regions) or known.zone is None:
            continue
        accelerator = _accelerator(known)
        machine = MachineType(zone=known.zone, name=known.instance_type, vcpus=int(known.vcpus or 0),
                              memory_gib=float(known.memory_gb or 0), accelerator=accelerator,
                              accelerator_count=int(known.gpu_count))
        priced = _offer(prices, machine, accelerator, int(known.gpu_count), known.gpu, now) if accelerator else None
        if priced is None:
            unpriced += 1
            continue
        offers.append(priced)
    notes = ["gcp: machine types and zones need credentials and a project (Compute Engine machineTypes, "
             "acceleratorTypes): the previous snapshot's, priced anew"]
    if unpriced:
        notes.append(f"gcp: {unpriced} known offer(s) have no price in the catalog now; left out")
    return offers, notes
