"""The normalised offer: one instance type (or GCP host + attached GPUs) in one zone, with its prices."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class Offer:
    """One GPU offer in the schema shared by the shipped snapshot, live refreshes and the planner.

    - `gpu` is a canonical name from gpuplan.catalog.gpu_names.CANONICAL_GPUS (the estimator's names).
    - `gpu_count` may be fractional (AWS g6f.2xlarge has a quarter of an L4).
    - `gpu_memory_gb` is the memory of ONE GPU as the instance sees it (for a fractional GPU: the slice), in the
      unit the clouds report (GiB, the number marketed as "80GB"); `total_gpu_memory_gb` is the instance's sum.
    - `price_per_hour` / `spot_price_per_hour` are USD per instance-hour, None when not offered or unknown.
      On GCP they already include the attached GPUs (host VM + accelerators).
    - `zone` is an AZ id on AWS (`use1-az1`, account independent) and a zone name on GCP.
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
