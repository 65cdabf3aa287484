"""What a launch decided before anything is recorded: the chosen offer, the estimate, the launch plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gpuplan.jobs.spec import JobSpec
from gpuplan.launching.image_arch import ImageArchitectures


@dataclass(frozen=True)
class ChosenOffer:
    """Where the run goes: the machine type, place and price chosen for it."""

    provider: str
    cloud: str
    instance_type: str | None = None
    region: str | None = None
    zone: str | None = None
    gpu: str | None = None
    gpus_per_node: int = 0
    nodes: int = 1
    spot: bool = False
    price_per_hour: Decimal | None = None  # per node
    on_this_machine: bool = False  # the provider's machines are this computer (a CPU bench here measures it)

    @property
    def total_price_per_hour(self) -> Decimal | None:
        return None if self.price_per_hour is None else self.price_per_hour * self.nodes


@dataclass(frozen=True)
class RunEstimate:
    """The estimate recorded with the run (kept for estimate-vs-actual)."""

    hours: float
    tokens_per_s: float | None
    cost_usd: Decimal | None
    source: str
    params: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    # `hours` = startup_s / 3600 + the throughput's time for the tokens + on spot the expected interruptions
    # (gpuplan.estimating.job_hours; gpuplan.calibration.startup says why and how for the start-up).
    startup_s: float = 0.0
    startup_source: str | None = None
    startup_detail: str | None = None

    @property
    def interruption_hours(self) -> float:
        """Hours of `hours` expected to be lost to spot interruptions (0 on demand), so the one-line estimate
        can say where its time goes beyond compute and start-up."""
        breakdown = self.detail.get("hours") or {}
        return float(breakdown.get("interruption_hours") or 0.0)

    @property
    def mfu_source(self) -> str | None:
        """Which throughput the estimate used ("user", "bench", "calibrated", "default"), when known."""
        value = self.detail.get("mfu_source")
        return None if value is None else str(value)

    @property
    def assumptions(self) -> tuple[str, ...]:
        """The layout and workload defaults the step model assumed (estimate's `assumed` lines), so launch can say
        what it timed; empty for a measured or given throughput and for runs recorded before they were kept."""
        return tuple(str(a) for a in self.detail.get("assumptions") or ())


@dataclass(frozen=True)
class LaunchPlan:
    """Everything decided before anything is recorded or started; `gpuplan launch --dry-run` prints this."""

    spec: JobSpec
    spec_text: str
    source_dir: str | None
    offer: ChosenOffer
    estimate: RunEstimate | None
    # --allow-cpu turned a GPU spec into this CPU job: why, recorded with the run (the spec text still asks for GPUs)
    cpu_fallback: str | None = None
    # The architectures the job's image runs on, and how gpuplan knows (gpuplan.launching.image_arch)
    image_arch: ImageArchitectures | None = None

    def as_dict(self) -> dict[str, Any]:
        est = self.estimate
        return {
            "name": self.spec.name,
            "provider": self.offer.provider,
            "cloud": self.offer.cloud,
            "instance_type": self.offer.instance_type,
            "region": self.offer.region,
            "gpu": self.offer.gpu,
            "gpus_per_node": self.offer.gpus_per_node,
            "nodes": self.offer.nodes,
            "spot": self.offer.spot,
            "price_per_hour": self.offer.total_price_per_hour,
            "est_hours": round(est.hours, 6) if est else None,
            "est_cost_usd": est.cost_usd if est else None,
            "est_tokens_per_s": est.tokens_per_s if est else None,
            "estimate_source": est.source if est else None,
            "mfu_source": est.mfu_source if est else None,
            "assumed": list(est.assumptions) if est else [],
            "startup_s": round(est.startup_s, 3) if est else None,
            "startup_source": est.startup_source if est else None,
            "startup_detail": est.startup_detail if est else None,
            "hours": est.detail.get("hours") if est else None,  # compute + start-up + interruptions, as plan's
            "max_hours": self.spec.limits.max_hours,
            "budget_usd": self.spec.limits.budget_usd,
            "image_architectures": sorted(self.image_arch.archs) if self.image_arch else None,
        }
