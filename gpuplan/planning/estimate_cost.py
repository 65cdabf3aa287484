"""Dollars for an estimate: the cheapest catalog offers that give exactly its GPUs (pure; the caller loads offers).

An offer fits when it is the estimate's GPU type with exactly the estimate's GPUs per node: the wall time was
computed for that arrangement (nodes x GPUs per node, NVLink inside a node, the network between), so paying for
idle extra GPUs, a fraction of one, or a different topology would not be the same job. The planner explores
other counts and GPU types; this answers "what does *this* setup cost". Cost = instance price x nodes x billed
hours (gpuplan.planning.job_cost: exact, each cloud's billing minimum), over the offers `plan` and a launch would use
(standard zones: gpuplan.catalog.zones.launchable), so `estimate`, `plan` and `prices` quote one price.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuplan.estimating.estimate import Estimate
from gpuplan.planning.job_cost import job_cost


def cheapest_offers(result: Estimate, offers: Iterable[Any], *, limit: int = 5,
                    min_billed_seconds: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """The `limit` cheapest (cloud, instance type, market) arrangements for `result`, cheapest zone of each, ranked
    on the exact cost (`min_billed_seconds`: each cloud's billing minimum)."""
    if not result.fits:
        return []
    minimums = min_billed_seconds or {}
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
            total = job_cost(price, nodes, result.wall_hours, min_billed_seconds=minimums.get(offer.cloud, 0))
            key = (offer.cloud, offer.instance_type, spot)
            if key not in best or total < best[key]["total_usd"]:
                best[key] = {"cloud": offer.cloud, "instance_type": offer.instance_type, "region": offer.region,
                             "gpus_per_node": int(count), "nodes": nodes, "spot": spot, "price_per_hour": price,
                             "total_usd": total}
    return sorted(best.values(), key=lambda row: (row["total_usd"], row["cloud"], row["instance_type"]))[:limit]
