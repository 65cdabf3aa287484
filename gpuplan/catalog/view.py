"""What `gpuplan prices` shows: one row per (cloud, instance type, GPUs, region, zone type) at its cheapest zone.

The zone type is part of the key so a Local Zone's price never stands for its parent region (Atlanta's
`use1-atl2-az1` is not us-east-1's price); the row names the zone it quotes, in full.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any

from gpuplan.catalog.offer import Offer

SORT_KEYS = ("price", "price-per-gpu", "price-per-tflop")


@dataclass(frozen=True)
class PriceRow:
    """An offer at its region's cheapest zone of one zone type, with the derived prices used for sorting."""

    offer: Offer
    spot: bool
    price: Decimal
    price_per_gpu: Decimal
    peak_tflops_per_gpu: float | None
    price_per_tflop: Decimal | None  # USD per hour per peak dense BF16 TFLOP/s of the whole instance
    zones: int  # zones of the region where this offer exists

    def as_json(self) -> dict[str, Any]:
        """Every offer-schema field, then the derived ones (the stable JSON contract of `gpuplan prices`)."""
        out: dict[str, Any] = {f.name: getattr(self.offer, f.name) for f in fields(Offer)}
        count = self.offer.gpu_count
        out["gpu_count"] = int(count) if float(count).is_integer() else count
        out.update(
            zone_type=self.offer.zone_type,
            spot=self.spot,
            price=self.price,
            price_per_gpu=self.price_per_gpu,
            peak_tflops_per_gpu=self.peak_tflops_per_gpu,
            price_per_tflop=self.price_per_tflop,
            zones=self.zones,
        )
        return out


def cheapest_per_region(offers: Iterable[Offer], *, spot: bool, peak_tflops: Mapping[str, float]) -> list[PriceRow]:
    """Collapse zones: keep the cheapest zone per (cloud, instance type, GPU, GPU count, region, zone type).

    The GPU and its count are part of the key because a GCP n1 host carries different attached GPUs.
    Offers without a price for the chosen market are dropped (they cannot be ranked).
    """
    best: dict[tuple[Any, ...], Offer] = {}
    zones: dict[tuple[Any, ...], int] = {}
    for offer in offers:
        price = offer.price(spot)
        if price is None:
            continue
        key = (offer.cloud, offer.instance_type, offer.gpu, offer.gpu_count, offer.region, offer.zone_type)
        zones[key] = zones.get(key, 0) + 1
        current = best.get(key)
        if current is None or (price, offer.zone or "") < (current.price(spot), current.zone or ""):  # type: ignore[operator]
            best[key] = offer
    rows = []
    for key, offer in best.items():
        price = offer.price(spot)
        per_gpu = offer.price_per_gpu(spot)
        assert price is not None and per_gpu is not None
        tflops = peak_tflops.get(offer.gpu)
        per_tflop = price / Decimal(str(tflops * offer.gpu_count)) if tflops and offer.gpu_count > 0 else None
        rows.append(PriceRow(offer, spot, price, per_gpu, tflops, per_tflop, zones[key]))
    return rows


def sort_rows(rows: list[PriceRow], by: str) -> list[PriceRow]:
    """Sort ascending by the chosen price; ties (and rows lacking a TFLOP figure, which go last) stay stable
    by cloud, region and instance type so the output is deterministic."""
    if by not in SORT_KEYS:
        raise ValueError(f"unknown sort key {by!r}")

    def key(row: PriceRow) -> tuple[Any, ...]:
        o = row.offer
        if by == "price":
            primary: tuple[Any, ...] = (0, row.price)
        elif by == "price-per-gpu":
            primary = (0, row.price_per_gpu)
        else:
            primary = (0, row.price_per_tflop) if row.price_per_tflop is not None else (1, row.price_per_gpu)
        return (*primary, o.cloud, o.region, o.instance_type, o.gpu, o.gpu_count, o.zone or "")

    return sorted(rows, key=key)
