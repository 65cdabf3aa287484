"""Dollars for an estimate: the cheapest catalog offers that give exactly its GPUs (pure; the caller loads offers).

An offer fits when it is the estimate's GPU type with exactly the estimate's GPUs per node: the wall time was
computed for that arrangement (nodes x GPUs per node, NVLink inside a node, the network between), so paying for
idle extra GPUs, a fraction of one, or a different topology would not be the same job. The planner explores
other counts and GPU types; this answers "what does *this* setup cost". Cost = instance price x nodes x hours.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from gpuplan.estimating.estimate import Estimate


def cheapest_offers(result: Estimate, offers: Iterable[Any], *, limit: int = 5) -> list[dict[str, Any]]:
    """The `limit` cheapest (cloud, instance type, market) arrangements for `result`, cheapest region of each."""
    if not result.fits:
        return []
    hours = Decimal(str(result.wall_hours))
    best: dict[tuple[str, str, bool], dict[str, Any]] = {}
    for offer in offers:
        count = offer.gpu_count
        if offer.gpu != result.gpu or count != result.gpus_per_node:
            continue
        nodes = result.nodes
        for spot in (False, True):
            price = offer.price(spot)
            if price is None:
                continue
            total = (price * nodes * hours).quantize(Decimal("0.01"))
            key = (offer.cloud, offer.instance_type, spot)
            if key not in best or total < best[key]["total_usd"]:
                best[key] = {"cloud": offer.cloud, "instance_type": offer.instance_type, "region": offer.region,
                             "gpus_per_node": int(count), "nodes": nodes, "spot": spot, "price_per_hour": price,
                             "total_usd": total}
    return sorted(best.values(), key=lambda row: (row["total_usd"], row["cloud"], row["instance_type"]))[:limit]
