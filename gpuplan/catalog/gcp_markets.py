"""Which GCE machine types Google sells on demand: some GPU shapes are Spot / Flex-start (or reservation) only.

Google's billing catalog still lists on-demand prices for shapes nobody can start on demand, so a price in the
catalog is no proof the market exists ("don't infer availability from pricing"). An offer the catalog kept with
such a price would be ranked first by the planner for an on-demand job and then refused by GCE in every zone, so
the catalog drops the on-demand price of these shapes when it loads them (Catalog.load) and the planner and the
failover never rank them on demand. providers/gcp/rules.py applies the same rule at launch.

It lives in the catalog (a layer below providers) because the catalog must apply it; the provider imports it.

Source: "Accelerator-optimized machine family", consumption option availability by machine type —
https://cloud.google.com/compute/docs/accelerator-optimized-machines#consumption_option_availability_by_machine_type
The table itself could NOT be retrieved verbatim for this rule (notes, GCP 12); what follows rests on maintainers
citing that table:
- a3-highgpu-1g/2g/4g (A3 High under 8 GPUs): Spot or Flex-start only. dstackai/gpuhunt#176 (2025-09): "remove any
  on-demand GCP offers that are not actually available on demand, even if the API returns on-demand prices. This
  drops A3 High instances with less than 8 GPUs from the catalog."
- a4-highgpu-8g (A4, B200): not on demand. dstackai/dstack#3100 (2025-09, answering "Does it mean B200 are not
  available on-demand?" with a link to the table: "Yes"); GoogleCloudPlatform/cluster-toolkit#6279 (2026-09): "On
  Demand is not supported for A4 according to this public doc".
A3 Ultra (H200) is left out: no source seen says it either way.
"""

from __future__ import annotations

import dataclasses

from gpuplan.catalog.offer import Offer

# Machine types GCE does not start as plain on-demand (provisioningModel STANDARD) VMs; see the module docstring.
NOT_ON_DEMAND: frozenset[str] = frozenset({"a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g", "a4-highgpu-8g"})
NOT_ON_DEMAND_SOURCE = ("https://cloud.google.com/compute/docs/accelerator-optimized-machines"
                        "#consumption_option_availability_by_machine_type")


def sold_on_demand(machine_type: str) -> bool:
    """False for a GCE machine type Google sells only as Spot / Flex-start (or through reservations)."""
    return machine_type not in NOT_ON_DEMAND


def sold_markets(offer: Offer) -> Offer:
    """The offer without the on-demand price of a GCP shape that is not sold on demand (other offers unchanged:
    NOT_ON_DEMAND holds GCE machine type names, which no other cloud's types share)."""
    if offer.price_per_hour is None or sold_on_demand(offer.instance_type):  # GCE machine type names only
        return offer
    return dataclasses.replace(offer, price_per_hour=None)
