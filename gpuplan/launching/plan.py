"""Decide a launch (offer and estimate) without recording or starting anything."""

from __future__ import annotations

from pathlib import Path

from gpuplan.jobs.spec import JobSpec
from gpuplan.launching.choose import choose_offer
from gpuplan.launching.code_upload import check_code
from gpuplan.launching.estimate import estimate_run
from gpuplan.launching.image_arch import ImageArchitectures, image_architectures
from gpuplan.launching.offer import LaunchPlan
from gpuplan.launching.run_storage import check_run_storage
from gpuplan.providers.base import Provider


def plan_launch(spec: JobSpec, spec_text: str, *, provider: Provider, source_dir: str | None = None,
                db_url: str | None = None) -> LaunchPlan:
    """Decide the offer and the estimate; nothing is recorded or started. `db_url`: where the price catalog's
    refreshes and the bench/calibration records live (default: the shipped catalog and the prior)."""
    image = _image_architectures(spec, provider)
    offer = choose_offer(spec, provider, db_url=db_url, archs=image.catalog_archs if image else None)
    check_run_storage(spec, provider)
    check_code(spec, source_dir, provider, offer.cloud)
    return LaunchPlan(spec=spec, spec_text=spec_text, source_dir=source_dir, offer=offer,
                      estimate=estimate_run(spec, offer, db_url=db_url), image_arch=image)


def _image_architectures(spec: JobSpec, provider: Provider) -> ImageArchitectures | None:
    """The image's architectures where the launch chooses among machines of several (a cloud's catalog): this
    machine, or a cluster's own nodes, are what they are."""
    if provider.runs_here or not provider.priced_by_catalog:
        return None
    return image_architectures(spec)


def source_dir_of(path: str | Path | None) -> str | None:
    return str(Path(path).resolve().parent) if path else None
