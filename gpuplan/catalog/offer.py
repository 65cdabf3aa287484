"""The normalised offer: one instance type (or GCP host + attached GPUs) in one zone, with its prices."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from gpuplan.catalog.zones import zone_type


@dataclass(frozen=True, slots=True)
class Offer:
    """One GPU offer in the schema shared by the shipped snapshot, live refreshes and the planner.

    - `gpu` is a canonical name from gpuplan.catalog.gpu_names.CANONICAL_GPUS (the estimator's names).
    - `gpu_count` may be fractional (AWS g6f.2xlarge has a quarter of an L4).
    - `gpu_memory_gb` is the memory of ONE GPU in GB as the vendor states it (L4 24, L40S 48; for a fractional
      GPU: the slice), converted from each cloud's unit in one place (gpuplan.catalog.gpu_memory);
      `total_gpu_memory_gb` is the instance's sum.
    - `price_per_hour` / `spot_price_per_hour` are USD per instance-hour, None when not offered or unknown.
      On GCP they already include the attached GPUs (host VM + accelerators).
    - `zone` is a zone id on AWS (`use1-az1`, `use1-atl2-az1`: account independent) and a zone name on GCP;
      `zone_type` (availability-zone / local-zone / wavelength-zone) is derived from it (gpuplan.catalog.zones).
    - `spot_price_per_hour` is the price in `zone` (AWS spot prices differ zone by zone; GCP's are per region, the
      same in each of its zones); `price_per_hour` (on-demand) is the region's.
    - `instance_type` on GCP n1 offers is the host machine type; the GPUs are attached (`gpu` x `gpu_count`).
    """

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    gpu: str
    gpu_count: float
    gpu_memory_gb: float | None
    vcpus: float | None
    memory_gb: float | None
    price_per_hour: Decimal | None
    spot_price_per_hour: Decimal | None
    arch: str | None
    source: str
    fetched_at: dt.datetime

    @property
    def zone_type(self) -> str:
        """availability-zone, local-zone or wavelength-zone (gpuplan.catalog.zones: derived from the zone id)."""
        return zone_type(self.zone)

    def price(self, spot: bool = False) -> Decimal | None:
        """The hourly price for the chosen market (spot or on-demand)."""
        return self.spot_price_per_hour if spot else self.price_per_hour

    def price_per_gpu(self, spot: bool = False) -> Decimal | None:
        """USD per GPU-hour (a fractional GPU counts as its fraction)."""
        price = self.price(spot)
        if price is None or self.gpu_count <= 0:
            return None
        return price / Decimal(str(self.gpu_count))

    @property
    def total_gpu_memory_gb(self) -> float | None:
        if self.gpu_memory_gb is None:
            return None
        return self.gpu_memory_gb * max(self.gpu_count, 1.0)
